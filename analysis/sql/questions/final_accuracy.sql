-- reads: finished_eval, last_eval, normal_quantile, seed_listed, wilson_centre, wilson_half
-- one row per: trial × test length
-- parameters: `level` (0.95)
-- What accuracy does each finished trial reach at each test length, at its final
-- evaluation step? One row per trial and test length, with the trial's configuration
-- group and seeds: the individual curves behind variance.sql (the report draws them
-- under the group's mean and best-of-N).
--
-- wilson_low, wilson_high: the Wilson score interval of the trial's accuracy, from its
-- `correct` right answers of `n` questions at that length, z = Φ⁻¹((1 + level)/2):
--     (p + z²/2n ± z · sqrt(p(1 − p)/n + z²/4n²)) / (1 + z²/n),  p = correct / n
-- It is the uncertainty from the finite test set of this one trial (the questions),
-- not from its seeds; it lies in [0, 1]; null when n = 0.
--
-- checkpoint: which evaluation the trial reports (reported_eval.sql, final_eval): final, or, with
-- eval.select best_long_loss, the lowest long-length loss at `step`; last_step and
-- last_step_accuracy: the trial's last evaluation, beside it (the same when final).
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`):
--     level  default 0.95  one of 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999

with

params as (
    select
        level,
        normal_quantile(level) as z
    from (select coalesce(cast(getvariable('level') as double), 0.95) as level) as given
),

measured as (
    select
        finished_eval.*,
        last_eval.accuracy as last_step_accuracy,
        finished_eval.correct / nullif(finished_eval.n, 0) as p
    from finished_eval
    left join last_eval using (study, trial_id, digits)
),

wilson as (
    select
        measured.*,
        params.level,
        wilson_centre(p, n, z) as centre,
        wilson_half(p, n, z) as half
    from measured
    cross join params
),

final as (
    select
        group_id,
        group_label,
        study,
        trial_id,
        columns(lambda c: seed_listed(c)),
        status,
        step,
        digits,
        in_distribution,
        n,
        correct,
        accuracy,
        -- at k = 0 and k = n the bounds are 0 and 1 exactly (the formula leaves 1e-18)
        case when correct = 0 then 0 else greatest(centre - half, 0) end as wilson_low,
        case when correct = n then 1 else least(centre + half, 1) end as wilson_high,
        level,
        checkpoint,
        last_step,
        last_step_accuracy
    from wilson
)

select *
from final
order by group_label, group_id, columns(lambda c: seed_listed(c)), trial_id, study, digits
