-- What accuracy does each finished trial reach at each test length, at its final
-- evaluation step? One row per trial and test length, with the trial's configuration
-- group and seeds: the individual curves behind variance.sql (the report draws them
-- under the group's mean and best-of-N).
-- No parameters.

with

finished as (
    select
        study,
        trial_id,
        status
    from trials
    where status in ('done', 'diverged')
),

final as (
    select
        groups.group_id,
        groups.group_label,
        eval.study,
        eval.trial_id,
        groups.weight_seed,
        groups.data_seed,
        finished.status,
        eval.step,
        eval.digits,
        eval.in_distribution,
        eval.n,
        eval.correct,
        eval.accuracy
    from final_eval as eval
    inner join finished using (study, trial_id)
    inner join groups using (study, trial_id)
)

select *
from final
order by group_label, group_id, weight_seed, data_seed, trial_id, study, digits
