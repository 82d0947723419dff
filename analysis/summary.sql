-- How accurate is each (task, positional encoding, weight seed, data seed) at each
-- test length, at the last evaluation of its trials? The table `lg-study run` prints
-- when a study ends. Long form; trials that share all four keys (e.g. differing only
-- in model size) are averaged.

with

with_settings as (
    select
        trials.task,
        trials.pe,
        trials.weight_seed,
        trials.data_seed,
        final_eval.digits,
        final_eval.in_distribution,
        final_eval.accuracy
    from final_eval
    inner join trials using (study, trial_id)
),

final as (
    select
        task,
        pe,
        weight_seed,
        data_seed,
        digits,
        in_distribution,
        avg(accuracy) as accuracy
    from with_settings
    group by task, pe, weight_seed, data_seed, digits, in_distribution
)

select *
from final
order by task, pe, weight_seed, data_seed, digits
