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
-- Parameters (DuckDB variables; `lg-study query --param name=value`):
--     level  default 0.95  one of 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999

with

-- z = Φ⁻¹((1 + level) / 2) for the levels the Wilson interval takes
normal_quantiles (level, z) as (
    values
        (0.5::double, 0.6744897501960817::double), (0.8, 1.2815515655446004),
        (0.9, 1.6448536269514722), (0.95, 1.959963984540054), (0.98, 2.3263478740408408),
        (0.99, 2.5758293035489004), (0.999, 3.2905267314919255)
),

params as (
    select
        given.level,
        coalesce(
            normal_quantiles.z,
            error('level must be one of 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999')
        ) as z
    from (select coalesce(cast(getvariable('level') as double), 0.95) as level) as given
    left join normal_quantiles using (level)
),

finished as (
    select
        study,
        trial_id,
        status
    from finished_trials
),

measured as (
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
        eval.accuracy,
        eval.correct / nullif(eval.n, 0) as p
    from final_eval as eval
    inner join finished using (study, trial_id)
    inner join groups using (study, trial_id)
),

wilson as (
    select
        measured.*,
        params.level,
        (p + z ^ 2 / (2 * n)) / (1 + z ^ 2 / n) as centre,
        z / (1 + z ^ 2 / n) * sqrt(p * (1 - p) / n + z ^ 2 / (4 * n ^ 2)) as half
    from measured
    cross join params
),

final as (
    select
        group_id,
        group_label,
        study,
        trial_id,
        weight_seed,
        data_seed,
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
        level
    from wilson
)

select *
from final
order by group_label, group_id, weight_seed, data_seed, trial_id, study, digits
