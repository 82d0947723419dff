-- reads: checked_level, final_samples, normal_quantile, seed_listed, seed_mean_interval, wilson_centre, wilson_half
-- one row per: group × test length × cascade length
-- parameters: `level` (0.95)
-- How does accuracy fall with the carry-cascade length of a question (003 Fig. 8a,
-- 8c)? Per configuration group, test length and cascade length: each finished trial's
-- accuracy on the questions of that cascade length (at its last sampled step), the
-- mean over the group's trials with an interval over seeds, and how common that
-- cascade length is among the questions of that length.
--
-- cascade is the longest carry cascade of the question (003 §4, App. C.4; 0 = no
-- carry at all), as the samples table stores it.
--
-- The unit is the seed. The trials of a group answer the same questions (the eval
-- seed is fixed per study), so what varies between them is the seeds, not the
-- questions: pooling their answers would count each question once per trial and
-- hide that two seeds can score 0.97 and 0.01 on the same questions. So:
--   accuracy         mean over the group's trials of each trial's accuracy
--   mean_low/high    the interval of that mean over seeds at `level`, the one
--                    variance.sql gives the mean at a length (macros.sql
--                    seed_mean_interval: crossed weight x data seeds by the two-way
--                    random-effects variance with Satterthwaite's t, else t over seed
--                    pairs; clipped to [0, 1]); mean_method, mean_df and mean_coverage
--                    (its coverage measured by simulation) say which and how good.
--                    Null for one seed pair.
--   trials           per trial (ordered by weight seed, data seed): its questions,
--                    right answers, accuracy and Wilson 95 % interval, which is the
--                    question-level uncertainty of that one trial, z = 1.959964:
--       centre ± half = (p + z²/2n ± z · sqrt(p(1 − p)/n + z²/4n²)) / (1 + z²/n)
-- questions and correct are totals over the trials (questions / n_trials per trial).
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`):
--     level      default 0.95  coverage of the interval over seeds, 0 < level < 1

with

params as (
    select checked_level(getvariable('level'), 0.001, 0.999) as level
),

trial_cells as (
    select
        group_id,
        group_label,
        study,
        trial_id,
        columns(lambda c: seed_listed(c)),
        digits,
        bool_and(in_distribution) as in_distribution,
        cascade,
        count(*) as questions,
        count(*) filter (where correct) as correct,
        count(*) filter (where correct) / count(*) as accuracy
    from final_samples
    group by all  -- the trial (its group, study, id and seeds), digits and cascade
),

trial_wilson as (
    select
        trial_cells.*,
        struct_pack(*columns(lambda c: seed_listed(c))) as seed_order,  -- sorts as the seeds, first to last
        wilson_centre(accuracy, questions, normal_quantile(0.95)) as wilson_centre,
        wilson_half(accuracy, questions, normal_quantile(0.95)) as wilson_half
    from trial_cells
),

cells as (
    select
        group_id,
        any_value(group_label) as group_label,
        digits,
        bool_and(in_distribution) as in_distribution,
        cascade,
        count(*) as n_trials,
        sum(questions) as questions,
        sum(correct) as correct,
        -- added smallest first: the same trials give the same bits in any row order
        list_avg(list(accuracy order by accuracy)) as accuracy,
        list(accuracy order by seed_order, study, trial_id) as trial_accuracies,
        list(
            struct_pack(
                study,
                trial_id,
                *columns(lambda c: seed_listed(c)),
                questions,
                correct,
                accuracy,
                wilson95_low := greatest(wilson_centre - wilson_half, 0),  -- clamps round-off only
                wilson95_high := least(wilson_centre + wilson_half, 1)
            )
            order by seed_order, study, trial_id
        ) as trials
    from trial_wilson
    group by group_id, digits, cascade
),

-- a seed pair's cell: the mean of its trials (the same seeds run in two studies)
seed_cells as (
    select
        {'group_id': group_id, 'digits': digits, 'cascade': cascade} as key,
        weight_seed,
        data_seed,
        list_avg(list(accuracy order by accuracy)) as y
    from trial_cells
    group by group_id, digits, cascade, weight_seed, data_seed
),

mean_interval as (
    select
        key.group_id,
        key.digits,
        key.cascade,
        mean_low,
        mean_high,
        mean_method,
        mean_df,
        mean_coverage
    from seed_mean_interval(seed_cells, (select level from params))
),

final as (
    select
        cells.group_id,
        cells.group_label,
        cells.digits,
        cells.in_distribution,
        cells.cascade,
        cells.n_trials,
        cells.questions,
        cells.correct,
        cells.accuracy,
        mean_interval.mean_low,
        mean_interval.mean_high,
        mean_interval.mean_method,
        mean_interval.mean_df,
        mean_interval.mean_coverage,
        cells.questions / sum(cells.questions) over (partition by cells.group_id, cells.digits)
            as share_of_questions,
        cells.trial_accuracies,
        cells.trials,
        params.level
    from cells
    left join mean_interval using (group_id, digits, cascade)
    cross join params
)

select *
from final
order by group_label, group_id, digits, cascade
