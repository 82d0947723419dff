-- How much do trials that differ only by their seeds disagree (001 Fig. 10)?
-- Per configuration group (view `groups`) and test length, over the group's finished
-- trials (done or diverged), each at its final evaluation step: the number of trials,
-- mean, sample standard deviation, min, median, max of exact-match accuracy, the
-- best-of-N, and a 95 % interval of the mean.
--
-- best_of_n is the accuracy of one trial, the group's best: the highest mean accuracy
-- over all its tested lengths (ties to the smaller trial_id), as papers report "best of
-- N seeds" curves; max is the per-length envelope, which may mix trials. An accuracy of
-- NaN (final_eval reads it as null) is no measurement: it counts in no statistic, and a
-- trial with one never becomes the best of N. The same trial_id in two studies is two
-- trials (rows are keyed by study and trial_id).
-- The interval is t-based: mean ± t(0.975, n − 1) · sd / sqrt(n), with the exact
-- quantile for n − 1 <= 30 and its Cornish–Fisher series beyond (error < 1e-7); null
-- for a single trial. It is not clipped to [0, 1] and assumes roughly normal
-- accuracies across seeds, which bimodal "works / fails" seeds are not: read it
-- together with min, median and max.
-- in_distribution marks lengths inside the training range.
-- No parameters.

with

finished as (
    select
        study,
        trial_id
    from trials
    where status in ('done', 'diverged')
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
    inner join finished using (study, trial_id)
    inner join groups using (study, trial_id)
),

-- a trial's mean over its lengths; null when one of them has no accuracy
trial_means as (
    select
        group_id,
        study,
        trial_id,
        case when count(accuracy) = count(*) then avg(accuracy) end as mean_accuracy
    from measured
    group by group_id, study, trial_id
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

-- two-sided 95 % quantiles of Student's t by degrees of freedom
t_table (df, t) as (
    values
        (1, 12.706205), (2, 4.302653), (3, 3.182446), (4, 2.776445), (5, 2.570582),
        (6, 2.446912), (7, 2.364624), (8, 2.306004), (9, 2.262157), (10, 2.228139),
        (11, 2.200985), (12, 2.178813), (13, 2.160369), (14, 2.144787), (15, 2.131450),
        (16, 2.119905), (17, 2.109816), (18, 2.100922), (19, 2.093024), (20, 2.085963),
        (21, 2.079614), (22, 2.073873), (23, 2.068658), (24, 2.063899), (25, 2.059539),
        (26, 2.055529), (27, 2.051831), (28, 2.048407), (29, 2.045230), (30, 2.042272)
),

per_length as (
    select
        measured.group_id,
        measured.group_label,
        measured.digits,
        bool_and(measured.in_distribution) as in_distribution,
        count(measured.accuracy) as n_trials,
        avg(measured.accuracy) as mean,
        stddev_samp(measured.accuracy) as sd,
        min(measured.accuracy) as min,
        median(measured.accuracy) as median,
        max(measured.accuracy) as max,
        max(measured.accuracy) filter (
            where measured.trial_id = best_trials.best_trial_id
            and measured.study = best_trials.best_study
        ) as best_of_n,
        any_value(best_trials.best_study) as best_study,
        any_value(best_trials.best_trial_id) as best_trial_id
    from measured
    inner join best_trials using (group_id)
    group by measured.group_id, measured.group_label, measured.digits
),

with_quantile as (
    select
        per_length.*,
        case
            when per_length.n_trials < 2 then null
            when per_length.n_trials - 1 <= 30 then t_table.t
            else z + (z ^ 3 + z) / (4 * v)
                + (5 * z ^ 5 + 16 * z ^ 3 + 3 * z) / (96 * v ^ 2)
                + (3 * z ^ 7 + 19 * z ^ 5 + 17 * z ^ 3 - 15 * z) / (384 * v ^ 3)
                + (79 * z ^ 9 + 776 * z ^ 7 + 1482 * z ^ 5 - 1920 * z ^ 3 - 945 * z)
                / (92160 * v ^ 4)
        end as t_quantile
    from per_length
    left join t_table on t_table.df = per_length.n_trials - 1
    cross join (select 1.959963984540054::double as z) as normal
    cross join lateral (select (per_length.n_trials - 1)::double as v) as dof
),

final as (
    select
        group_id,
        group_label,
        digits,
        in_distribution,
        n_trials,
        mean,
        sd,
        min,
        median,
        max,
        best_of_n,
        best_study,
        best_trial_id,
        mean - t_quantile * sd / sqrt(n_trials) as ci95_t_low,
        mean + t_quantile * sd / sqrt(n_trials) as ci95_t_high
    from with_quantile
)

select *
from final
order by group_label, group_id, digits
