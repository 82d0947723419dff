-- reads: bootstrap_seed, checked_level, draw_index, finished_eval, percentile_high, percentile_low, resample_count, seed_mean_interval
-- one row per: group × test length
-- parameters: `resamples` (1000), `boot_seed` (0), `level` (0.95)
-- How much do trials that differ only by their seeds disagree (001 Fig. 10)?
-- Per configuration group (view `groups`) and test length, over the group's finished
-- trials (done or diverged), each at its final evaluation step: the number of trials,
-- mean, sample standard deviation, min, median, max of exact-match accuracy, the
-- best-of-N, and an interval of the mean that stays inside [0, 1].
--
-- best_of_n is the accuracy of one trial, the group's best: the highest mean accuracy
-- over the lengths the group measured (ties to the smaller trial_id), as papers report "best of
-- N seeds" curves; max is the per-length envelope, which may mix trials. An accuracy of
-- NaN (final_eval reads it as null) is no measurement: it counts in no statistic, and a
-- trial with one never becomes the best of N. The same trial_id in two studies is two
-- trials (rows are keyed by study and trial_id).
-- The interval of the mean over all seeds (mean_low, mean_high; mean_method says which):
-- for a complete crossed grid of weight x data seeds, mean ± t_ν·√V with V the two-way
-- random-effects variance of the grand mean and ν Satterthwaite's (macros.sql); else a
-- t interval over the seed pairs' cells (a cell: a seed pair's mean over its trials);
-- clipped to [0, 1]. Coverage 0.94-0.96 measured at 3 x 5 to 24 x 20 seeds, 0.905 at
-- 3 x 5 near the bound 1 (docs/analysis.md, formulas there), printed in mean_coverage.
--
-- Kept for comparison, (mean_boot_low, mean_boot_high): a percentile bootstrap over trials
-- (docs/analysis.md), which treats trials sharing seeds as independent (covered 0.33-0.53).
-- in_distribution marks lengths inside the training range.
--
-- How much of that spread would a finite test set make alone? Each trial's accuracy is
-- a mean of n right-or-wrong answers, with binomial variance p(1 − p)/n, estimated
-- without bias by p(1 − p)/(n − 1) (E[p̂(1 − p̂)] = p(1 − p)(n − 1)/n; null under 2
-- questions). test_noise_sd = √(mean over the group's trials of it) at that length;
-- test_noise_share = that mean over sd², the share of the seed-to-seed variance that the
-- questions alone would make (at most 1; null when sd is 0 or null). Every trial of a
-- group answers the same questions, so this is what independent per-question coin
-- flips would make (Jordan, ICLR 2024): the upper end when questions differ in
-- difficulty (seed_statistics.sql; docs/analysis.md, "Test-set noise").
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`):
--     resamples  default 1000  bootstrap replicates per group and length
--     boot_seed  default 0     seed of the bootstrap draws
--     level      default 0.95  coverage of the interval, 0 < level < 1

with

params as (
    select
        resample_count(getvariable('resamples')) as resamples,
        bootstrap_seed(getvariable('boot_seed')) as boot_seed,
        checked_level(getvariable('level'), 0.001, 0.999) as level
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
        accuracy,
        accuracy * (1 - accuracy) / nullif(n - 1, 0) as test_noise,
        -- added smallest first: the same trials give the same bits in any row order
        list_avg(list(accuracy order by accuracy) over (partition by group_id, digits))
            as length_mean
    from finished_eval
),

-- the lengths some trial of the group measured: a length no trial has an accuracy at
-- says nothing about which trial is best
measured_lengths as (
    select
        group_id,
        digits
    from measured
    group by group_id, digits
    having count(accuracy) > 0
),

-- a trial's mean over those lengths, its accuracies added smallest first: two trials
-- with the same accuracies tie to the last bit, whatever the order of the rows or of
-- the lengths they scored them at; null when it lacks one of the lengths
trial_means as (
    select
        measured.group_id,
        measured.study,
        measured.trial_id,
        case
            when count(measured.accuracy) = count(*)
                then list_avg(list(measured.accuracy order by measured.accuracy))
        end as mean_accuracy
    from measured
    inner join measured_lengths using (group_id, digits)
    group by measured.group_id, measured.study, measured.trial_id
),

best_trials as (
    select
        group_id,
        study as best_study,
        trial_id as best_trial_id
    from trial_means
    qualify row_number() over (
        partition by group_id order by mean_accuracy desc nulls last, trial_id, study
    ) = 1
),

per_length as (
    select
        measured.group_id,
        measured.group_label,
        measured.digits,
        bool_and(measured.in_distribution) as in_distribution,
        count(measured.accuracy) as n_trials,
        any_value(measured.length_mean) as mean,
        case when count(measured.accuracy) >= 2 then sqrt(list_sum(list(
            (measured.accuracy - measured.length_mean) ^ 2 order by measured.accuracy
        )) / (count(measured.accuracy) - 1)) end as sd,
        min(measured.accuracy) as min,
        median(measured.accuracy) as median,
        max(measured.accuracy) as max,
        max(measured.accuracy) filter (
            where measured.trial_id = best_trials.best_trial_id
            and measured.study = best_trials.best_study
        ) as best_of_n,
        any_value(best_trials.best_study) as best_study,
        any_value(best_trials.best_trial_id) as best_trial_id,
        list(measured.accuracy order by measured.study, measured.trial_id)
            filter (where measured.accuracy is not null) as accuracies,
        -- over the trials with an accuracy; null when one of them has no noise estimate
        case when count(measured.test_noise) = count(measured.accuracy) then list_avg(list(
            measured.test_noise order by measured.study, measured.trial_id
        ) filter (where measured.accuracy is not null)) end as test_noise
    from measured
    inner join best_trials using (group_id)
    group by measured.group_id, measured.group_label, measured.digits
),

-- each replicate: the mean of n_trials accuracies drawn with replacement
replicates as (
    select
        per_length.group_id,
        per_length.digits,
        per_length.n_trials,
        per_length.accuracies,
        unnest(range(params.resamples)) as replicate
    from per_length
    cross join params
    where per_length.n_trials >= 2
),

resampled as (
    select
        replicates.group_id,
        replicates.digits,
        list_avg([
            replicates.accuracies[
                1 + draw_index(hash(hash(params.boot_seed, replicates.group_id, replicates.digits,
                    replicates.replicate, draw)), replicates.n_trials)
            ]
            for draw in range(replicates.n_trials)
        ]) as mean
    from replicates
    cross join params
),

replicate_sorted as (
    select
        group_id,
        digits,
        list_sort(list(mean)) as sorted
    from resampled
    group by group_id, digits
),

-- percentiles with linear interpolation between the sorted replicates (formulas.sql)
bootstrap as (
    select
        replicate_sorted.group_id,
        replicate_sorted.digits,
        percentile_low(replicate_sorted.sorted, params.level) as mean_boot_low,
        percentile_high(replicate_sorted.sorted, params.level) as mean_boot_high
    from replicate_sorted
    cross join params
),

-- the interval of the mean over all seeds (macros.sql): a seed pair's cell holds its
-- trial's accuracy (the mean of its replicates, or of the same trial in two studies)
cells as (
    select
        {'group_id': group_id, 'digits': digits} as key,
        weight_seed,
        data_seed,
        list_avg(list(accuracy order by accuracy)) as y
    from measured
    where accuracy is not null
    group by group_id, digits, weight_seed, data_seed
),

mean_interval as (
    select
        key.group_id,
        key.digits,
        mean_method,
        mean_df,
        mean_coverage,
        mean_low,
        mean_high
    from seed_mean_interval(cells, (select level from params))
),

final as (
    select
        per_length.group_id,
        per_length.group_label,
        per_length.digits,
        per_length.in_distribution,
        per_length.n_trials,
        per_length.mean,
        mean_interval.mean_low,
        mean_interval.mean_high,
        mean_interval.mean_method,
        mean_interval.mean_df,
        mean_interval.mean_coverage,
        bootstrap.mean_boot_low,
        bootstrap.mean_boot_high,
        per_length.sd,
        per_length.min,
        per_length.median,
        per_length.max,
        per_length.best_of_n,
        per_length.best_study,
        per_length.best_trial_id,
        sqrt(per_length.test_noise) as test_noise_sd,
        -- least skips a null: an unknown noise must stay unknown
        case when per_length.sd > 0 and per_length.test_noise is not null then
            least(per_length.test_noise / per_length.sd ^ 2, 1)
        end as test_noise_share,
        params.resamples,
        params.boot_seed,
        params.level
    from per_length
    left join bootstrap using (group_id, digits)
    left join mean_interval using (group_id, digits)
    cross join params
)

select *
from final
order by group_label, group_id, digits
