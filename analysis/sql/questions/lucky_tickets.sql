-- reads: bootstrap_seed, checked_level, eval, final_eval, finished_trials, groups, largest_complete_subgrid, length_list, resample_count, seed_concordance, seed_grid_cells, seed_statistics, subgrid_coverage, trial_length_values, trials
-- one row per: crossed group × weight seed (one row per group it cannot analyse)
-- parameters: `threshold` (0.9), `digits` (all OOD lengths), `resamples` (1000), `boot_seed` (0), `level` (0.95)
-- Are there lucky weight tickets (001 Fig. 11, F.9)? For every configuration group
-- whose trials cross at least 2 weight seeds with at least 2 data seeds: how much of
-- the variance of accuracy the weight seed explains, how much the data seed, how much
-- is left; and per weight seed its mean, min and max over data orders, and whether it
-- is a lucky ticket: its minimum over data orders is above `threshold`. One row per
-- (group, weight seed); the group's numbers repeat on its rows, with the same numbers
-- per test length in `by_length` (001 F.9 shows 30, 50, 70 and 100 digits apart). A
-- group with no complete 2 x 2 subgrid gets one row with weight_seed null and
-- `skipped_reason`.
--
-- The measured value y(w, d) of a trial is its mean accuracy over the out-of-
-- distribution test lengths at its final evaluation step (or over the lengths in
-- `digits` when given; measured_kind says whether they are out of or inside the
-- training range). A trial has no y when one of those lengths has no accuracy (none
-- recorded, or NaN): an unmeasured cell. When the same configuration ran in two
-- studies, a cell holds the mean of its trials. Finished diverged trials count with
-- the accuracy they had reached, like everywhere in analysis/.
--
-- A finite test set is no seed: sigma2_test_noise is the part of sigma2_residual that
-- the binomial noise of the cells' accuracies, p(1 − p)/n, makes, sigma2_residual_seeds
-- what is left for the weight × data interaction, test_noise_share_of_residual their
-- ratio (seed_statistics.sql; sigma2_weight and sigma2_data hold no noise). A lucky
-- ticket whose residual is mostly test noise is luck of the questions, not the seeds.
--
-- One file per question, each a table macro this file calls:
--   seed_grid.sql         which cells of the grid are measured, and why not
--                         (missing_cells, left_out_seeds, skipped_reason)
--   seed_subgrid.sql      the largest complete subgrid the statistics use
--   seed_components.sql   variance shares and components with their intervals
--   seed_bootstrap.sql    the percentile bootstrap kept for comparison (*_boot_*)
--   seed_concordance.sql  rank agreement: Kendall's W with Friedman's test
--   seed_statistics.sql   the four together, per group and length (by_length)
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`, or
-- `SET VARIABLE name = value` in the DuckDB client):
--     threshold  default 0.9   lucky when min over data orders > threshold
--     digits     default all out-of-distribution lengths; e.g. '50,100'
--     resamples  default 1000  bootstrap replicates per group
--     boot_seed  default 0     seed of the bootstrap draws
--     level      default 0.95  coverage of the intervals, 0 < level < 1

with

params as (
    select
        coalesce(cast(getvariable('threshold') as double), 0.9) as threshold,
        length_list(getvariable('digits')) as digits,
        resample_count(getvariable('resamples')) as resamples,
        bootstrap_seed(getvariable('boot_seed')) as boot_seed,
        checked_level(getvariable('level'), 0.001, 0.999) as level
),

-- every trial of every group, finished or not: the seeds the group's design spans
design as (
    select
        groups.group_id,
        groups.group_label,
        groups.study,
        groups.trial_id,
        groups.weight_seed,
        groups.data_seed,
        trials.status,
        finished_trials.trial_id is not null as finished
    from groups
    inner join trials using (study, trial_id)
    left join finished_trials using (study, trial_id)
),

measured as (
    select
        design.group_id,
        eval.study,
        eval.trial_id,
        eval.digits,
        eval.in_distribution,
        eval.accuracy,
        eval.n
    from final_eval as eval
    inner join design using (study, trial_id)
    cross join params
    where
        design.finished
        and case
            when params.digits is null then not eval.in_distribution
            else list_contains(params.digits, eval.digits)
        end
),

group_digits as (
    select
        group_id,
        list(distinct digits order by digits) as measured_digits,
        count(distinct digits) as n_digits,
        case
            when bool_and(in_distribution) then 'in-distribution'
            when not bool_or(in_distribution) then 'out-of-distribution'
            else 'mixed'
        end as measured_kind
    from measured
    group by group_id
),

-- y per trial at each measured length (at_digits) and over all of them (at_digits 0).
-- Means here and below add in a fixed order (list_avg of an ordered list): avg() adds
-- in the order rows arrive, which can change the last bit from run to run, and the
-- bootstrap must repeat exactly.
trial_values as (select * from trial_length_values(measured)),

-- the test-set noise of a trial's accuracy at each length: p(1 − p)/(n − 1), unbiased
-- for the binomial variance p(1 − p)/n of a mean of n right-or-wrong answers (E[p̂(1 −
-- p̂)] = p(1 − p)(n − 1)/n); null with fewer than 2 questions, which say nothing of it.
-- Named accuracy only so trial_length_values averages it over the lengths in the same
-- fixed order as y; over the lengths (at_digits 0) the mean is divided by |L| once more,
-- as y is a mean of |L| accuracies whose questions are drawn apart (a Generator per
-- length, lengthgen/evaluation.py), so their noises add as independent.
measured_noise as (
    select
        group_id,
        study,
        trial_id,
        digits,
        accuracy * (1 - accuracy) / nullif(n - 1, 0) as accuracy
    from measured
),

trial_noise as (
    select
        noise.group_id,
        noise.study,
        noise.trial_id,
        noise.at_digits,
        noise.y / case when noise.at_digits = 0 then group_digits.n_digits else 1 end as test_noise
    from trial_length_values(measured_noise) as noise
    inner join group_digits using (group_id)
),

-- materialized: read several times, and DuckDB would otherwise search again
grid_cells as materialized (
    select *
    from seed_grid_cells(design, trial_values)
),

subgrid as materialized (
    select *
    from largest_complete_subgrid(grid_cells)
),

-- the cells of the subgrid: y per length and over lengths; a cell run in two studies
-- holds the mean of its trials. Its test-set noise is their mean noise over the number
-- of distinct trials (trial_id: perturbation replicates, whose answers chaos draws
-- apart): the same trial_id in two studies (a copy, or the same seeds run again)
-- answered the same questions alike and adds no draw of its own; null when a trial's is.
crossed_cells as materialized (
    select
        design.group_id,
        design.weight_seed,
        design.data_seed,
        trial_values.at_digits,
        list_avg(list(trial_values.y order by design.study, design.trial_id)) as y,
        bool_or(design.status = 'diverged') as diverged,
        case when count(trial_noise.test_noise) = count(*) then
            list_avg(list(trial_noise.test_noise order by design.study, design.trial_id))
            / count(distinct design.trial_id)
        end as test_noise
    from design
    inner join trial_values using (group_id, study, trial_id)
    left join trial_noise using (group_id, study, trial_id, at_digits)
    inner join subgrid using (group_id, weight_seed, data_seed)
    where trial_values.y is not null
    group by design.group_id, design.weight_seed, design.data_seed, trial_values.at_digits
),

weight_means as (
    select
        group_id,
        at_digits,
        weight_seed,
        list_avg(list(y order by data_seed)) as mean,
        min(y) as min,
        max(y) as max,
        list(data_seed order by data_seed) as data_seeds,
        list(y order by data_seed) as accuracy_by_data_seed,
        list(diverged order by data_seed) as diverged_by_data_seed
    from crossed_cells
    group by group_id, at_digits, weight_seed
),

group_summary as (
    select *
    from seed_statistics(
        crossed_cells,
        (select resamples from params),
        (select boot_seed from params),
        (select level from params)
    )
),

-- the group's statistics at each measured length apart (001 F.9), one struct per length
length_rows as (
    select
        group_id,
        at_digits as digits,
        * exclude (group_id, at_digits, n_weight_seeds, n_data_seeds)
    from group_summary
    where at_digits > 0
),

by_length as (
    select
        group_id,
        list(length_rows order by digits) as by_length
    from length_rows
    group by group_id
),

labels as (
    select
        group_id,
        any_value(group_label) as group_label
    from design
    group by group_id
),

analysed as (
    select
        group_summary.group_id,
        weight_means.weight_seed,
        weight_means.mean,
        weight_means.min,
        weight_means.max,
        weight_means.min > params.threshold as lucky,
        concordance.rank_sum,
        weight_means.data_seeds,
        weight_means.accuracy_by_data_seed,
        weight_means.diverged_by_data_seed,
        group_summary.* exclude (group_id, at_digits),
        by_length.by_length
    from group_summary
    inner join weight_means using (group_id, at_digits)
    inner join seed_concordance(crossed_cells) as concordance using (group_id, at_digits, weight_seed)
    left join by_length using (group_id)
    cross join params
    where group_summary.at_digits = 0
),

final as (
    select
        coverage.group_id,
        labels.group_label,
        group_digits.measured_digits,
        group_digits.measured_kind,
        analysed.weight_seed,
        analysed.mean,
        analysed.min,
        analysed.max,
        analysed.lucky,
        params.threshold,
        analysed.rank_sum,
        analysed.data_seeds,
        analysed.accuracy_by_data_seed,
        analysed.diverged_by_data_seed,
        analysed.n_weight_seeds,
        analysed.n_data_seeds,
        coverage.grid_weight_seeds,
        coverage.grid_data_seeds,
        coverage.missing_cells,
        coverage.left_out_seeds,
        coverage.skipped_reason,
        -- the group's statistics in seed_statistics' order (only analysed has these names)
        columns('^(grand_mean|ss_|ms_|sigma2_|component_share_|share_coverage|component_coverage|test_noise_)'),
        params.resamples,
        params.boot_seed,
        params.level,
        columns('^(boot_undefined|kendall_w|friedman_)'),
        analysed.by_length
    from subgrid_coverage(grid_cells, subgrid) as coverage
    inner join labels using (group_id)
    left join group_digits using (group_id)
    left join analysed using (group_id)
    cross join params
)

select *
from final
order by group_label, group_id, weight_seed
