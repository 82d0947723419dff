-- How likely is a configuration to succeed, and what does running N seeds buy? Per
-- configuration group and test length, over the group's finished trials (done or
-- diverged) at their final evaluation step; the trial is the unit, as in variance.sql
-- (the same trial_id in two studies is two trials; a NaN accuracy is no trial).
--
--   p_success          share of the n_trials trials whose accuracy reaches `threshold`
--                      (accuracy >= threshold), n_success of them
--   p_success_wilson_low, _high
--                      its Wilson score interval, z = Φ⁻¹((1 + level)/2), k = n_success,
--                      n = n_trials, p = k/n:
--                      (p + z²/2n ± z · sqrt(p(1 − p)/n + z²/4n²)) / (1 + z²/n)
--   seeds_for_a_success
--                      the fewest seeds N with 1 − (1 − p_low)^N >= level, p_low the
--                      interval's lower end: how many seeds to run to see at least one
--                      success with probability `level` if the success rate is as low
--                      as the data allow, N = ceil(ln(1 − level) / ln(1 − p_low));
--                      null when p_low = 0 (the trials cannot rule out that no seed
--                      ever succeeds)
--   expected_best_of_1, _5, _10
--                      the expected maximum accuracy of N draws with replacement from
--                      the group's trials: with x_(1) <= ... <= x_(n) the sorted
--                      accuracies, E[max of N] = Σ_k x_(k) · ((k/n)^N − ((k − 1)/n)^N)
--                      (exact; N = 1 gives the mean). It is what "best of N seeds"
--                      reports on average if one reran the group's own seeds, not
--                      variance.sql's best_of_n, which is the one best trial seen.
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`):
--     threshold  default 0.9   success when accuracy >= threshold
--     level      default 0.95  one of 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999

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
        coalesce(cast(getvariable('threshold') as double), 0.9) as threshold,
        given.level,
        coalesce(
            normal_quantiles.z,
            error('level must be one of 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999')
        ) as z
    from (select coalesce(cast(getvariable('level') as double), 0.95) as level) as given
    left join normal_quantiles using (level)
),

measured as (
    select
        groups.group_id,
        groups.group_label,
        eval.study,
        eval.trial_id,
        eval.digits,
        eval.in_distribution,
        eval.accuracy
    from final_eval as eval
    inner join finished_trials using (study, trial_id)
    inner join groups using (study, trial_id)
    where eval.accuracy is not null
),

-- each trial's place k among the group's n accuracies at the length, smallest first:
-- the chance that the maximum of N draws is the k-th value is (k/n)^N − ((k − 1)/n)^N
ranked as (
    select
        measured.*,
        measured.accuracy >= params.threshold as success,
        row_number() over (
            partition by measured.group_id, measured.digits
            order by measured.accuracy, measured.study, measured.trial_id
        ) as k,
        count(*) over (partition by measured.group_id, measured.digits) as n
    from measured
    cross join params
),

per_length as (
    select
        group_id,
        any_value(group_label) as group_label,
        digits,
        bool_and(in_distribution) as in_distribution,
        count(*) as n_trials,
        count(*) filter (where success) as n_success,
        -- least(): the weights add up to 1 up to round-off, which must not pass the max
        least(sum(accuracy * ((k / n) - ((k - 1) / n))), max(accuracy)) as expected_best_of_1,
        least(sum(accuracy * ((k / n) ^ 5 - ((k - 1) / n) ^ 5)), max(accuracy))
            as expected_best_of_5,
        least(sum(accuracy * ((k / n) ^ 10 - ((k - 1) / n) ^ 10)), max(accuracy))
            as expected_best_of_10
    from ranked
    group by group_id, digits
),

wilson as (
    select
        per_length.*,
        share.p as p_success,
        (p + z ^ 2 / (2 * n_trials)) / (1 + z ^ 2 / n_trials) as centre,
        z / (1 + z ^ 2 / n_trials)
        * sqrt(p * (1 - p) / n_trials + z ^ 2 / (4 * n_trials ^ 2)) as half
    from per_length
    cross join params
    cross join lateral (select per_length.n_success / per_length.n_trials as p) as share
),

intervals as (
    select
        *,
        -- at k = 0 and k = n the bounds are 0 and 1 exactly (the formula leaves 1e-18)
        case when n_success = 0 then 0 else greatest(centre - half, 0) end
            as p_success_wilson_low,
        case when n_success = n_trials then 1 else least(centre + half, 1) end
            as p_success_wilson_high
    from wilson
),

final as (
    select
        intervals.group_id,
        intervals.group_label,
        intervals.digits,
        intervals.in_distribution,
        intervals.n_trials,
        intervals.n_success,
        intervals.p_success,
        intervals.p_success_wilson_low,
        intervals.p_success_wilson_high,
        case
            when intervals.p_success_wilson_low <= 0 then null
            when intervals.p_success_wilson_low >= 1 then 1
            else greatest(
                ceil(ln(1 - params.level) / ln(1 - intervals.p_success_wilson_low)), 1
            )::bigint
        end as seeds_for_a_success,
        intervals.expected_best_of_1,
        intervals.expected_best_of_5,
        intervals.expected_best_of_10,
        params.threshold,
        params.level
    from intervals
    cross join params
)

select *
from final
order by group_label, group_id, digits
