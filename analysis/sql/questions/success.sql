-- reads: finished_eval, normal_quantile, seed_success_interval, wilson_high, wilson_low
-- one row per: group × test length
-- parameters: `threshold` (0.9), `level` (0.95)
-- How likely is a configuration to succeed, and what does running N seeds buy? Per
-- configuration group and test length, over the group's finished trials (done or
-- diverged) at their final evaluation step; the trial is the unit, as in variance.sql
-- (the same trial_id in two studies is two trials; a NaN accuracy is no trial).
--
--   p_success          share of the n_trials trials whose accuracy reaches `threshold`
--                      (accuracy >= threshold), n_success of them
--   p_success_low, _high
--                      its interval over seeds: Wilson's score interval at an effective
--                      number of trials (Korn & Graubard 1998, Survey Methodology 24,
--                      193-201; Dean & Pagano 2015, J. Survey Statistics and Methodology
--                      3, 484-503). A seed pair's cell holds the share of its trials
--                      that succeed; p is the cells' mean. For a complete crossed grid of
--                      a >= 2 weight x b >= 2 data seeds, V = the two-way random-effects
--                      variance of that mean (crossed_mean_variance over the success
--                      indicators, as variance.sql over accuracies) and
--                      n_eff = min(p(1 − p)/V, n_cells) · (z / t_ν)², ν Satterthwaite's
--                      degrees of freedom; when every cell or none succeeds, the
--                      indicators say nothing of how successes cluster, and the design
--                      effect of the accuracies stands in: n_eff = n_cells / max(1,
--                      V_acc / (s²_acc / n_cells)) · (z / t_ν_acc)². Otherwise (one seed
--                      varies, or the grid has holes) n_eff = n_cells: Wilson over the
--                      cells. p_success_method says which, p_success_n_effective the
--                      n_eff, p_success_coverage the coverage measured by simulation at
--                      the nearest design (docs/analysis.md). The table macro
--                      seed_success_interval (success_interval.sql) computes it, for
--                      profiles.sql too.
--   p_success_wilson_low, _high
--                      Wilson's interval with n = n_trials, kept for comparison: it
--                      treats trials that share seeds as independent (covered 0.48-0.95
--                      in crossed studies)
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

params as (
    select
        coalesce(cast(getvariable('threshold') as double), 0.9) as threshold,
        level,
        normal_quantile(level) as z
    from (select coalesce(cast(getvariable('level') as double), 0.95) as level) as given
),

measured as (
    select
        group_id,
        group_label,
        weight_seed,
        data_seed,
        study,
        trial_id,
        digits,
        in_distribution,
        accuracy
    from finished_eval
    where accuracy is not null
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
        -- least(): the weights add up to 1 up to round-off, which must not pass the max;
        -- summed in rank order, as a sum() adds in whatever order DuckDB's threads finish
        least(list_sum(list(accuracy * ((k / n) - ((k - 1) / n)) order by k)), max(accuracy))
            as expected_best_of_1,
        least(list_sum(list(accuracy * ((k / n) ^ 5 - ((k - 1) / n) ^ 5) order by k)), max(accuracy))
            as expected_best_of_5,
        least(list_sum(list(accuracy * ((k / n) ^ 10 - ((k - 1) / n) ^ 10) order by k)), max(accuracy))
            as expected_best_of_10
    from ranked
    group by group_id, digits
),

wilson as (
    select
        per_length.*,
        per_length.n_success / per_length.n_trials as p_success,
        case when n_success = 0 then 0 else wilson_low(n_success / n_trials, n_trials, params.z) end
            as p_success_wilson_low,
        case when n_success = n_trials then 1 else wilson_high(n_success / n_trials, n_trials, params.z) end
            as p_success_wilson_high
    from per_length
    cross join params
),

-- a seed pair's cell: the share of its trials that succeed and their mean accuracy
-- (several with perturbation replicates, or one trial in two studies), in a fixed order
cells as (
    select
        measured.group_id,
        measured.digits,
        measured.weight_seed,
        measured.data_seed,
        list_avg(list((measured.accuracy >= params.threshold)::double order by measured.accuracy)) as s,
        list_avg(list(measured.accuracy order by measured.accuracy)) as y
    from measured
    cross join params
    group by measured.group_id, measured.digits, measured.weight_seed, measured.data_seed
),

-- the interval over seeds of the share of seed pairs that succeed (success_interval.sql;
-- profiles.sql draws the same interval at every threshold)
seed_cells as (
    select {'group_id': group_id, 'digits': digits} as key, weight_seed, data_seed, s, y
    from cells
),

intervals as (
    select
        wilson.*,
        interval.method as p_success_method,
        interval.n_eff as p_success_n_effective,
        interval.low as p_success_low,
        interval.high as p_success_high,
        interval.coverage as p_success_coverage
    from wilson
    inner join seed_success_interval(seed_cells, (select level from params)) as interval
        on interval.key.group_id = wilson.group_id and interval.key.digits = wilson.digits
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
        intervals.p_success_low,
        intervals.p_success_high,
        intervals.p_success_method,
        intervals.p_success_n_effective,
        intervals.p_success_coverage,
        intervals.p_success_wilson_low,
        intervals.p_success_wilson_high,
        case
            when intervals.p_success_low <= 0 then null
            when intervals.p_success_low >= 1 then 1
            else greatest(
                ceil(ln(1 - params.level) / ln(1 - intervals.p_success_low)), 1
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
