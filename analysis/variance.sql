-- How much do trials that differ only by their seeds disagree (001 Fig. 10)?
-- Per configuration group (view `groups`) and test length, over the group's finished
-- trials (done or diverged), each at its final evaluation step: the number of trials,
-- mean, sample standard deviation, min, median, max of exact-match accuracy, the
-- best-of-N, and a 95 % interval of the mean.
--
-- best_of_n is the accuracy of one trial, the group's best: the highest mean accuracy
-- over all its tested lengths (ties to the smaller trial_id), as papers report "best of
-- N seeds" curves; max is the per-length envelope, which may mix trials.
-- The interval is t-based: mean ± t(0.975, n − 1) · sd / sqrt(n), with the exact
-- quantile for n − 1 <= 30 and its Cornish–Fisher series beyond (error < 1e-7); null
-- for a single trial. It is not clipped to [0, 1] and assumes roughly normal
-- accuracies across seeds, which bimodal "works / fails" seeds are not: read it
-- together with min, median and max.
-- in_distribution marks lengths inside the training range.
-- No parameters.

with

finished as (
    select trial_id
    from trials
    where status in ('done', 'diverged')
),

final_eval as (
    select
        groups.group_id,
        groups.group_label,
        eval.trial_id,
        eval.digits,
        eval.in_distribution,
        eval.accuracy
    from final_eval as eval
    inner join finished using (trial_id)
    inner join groups using (trial_id)
),

trial_means as (
    select
        group_id,
        trial_id,
        avg(accuracy) as mean_accuracy
    from final_eval
    group by group_id, trial_id
),

best_trials as (
    select
        group_id,
        trial_id as best_trial_id
    from trial_means
    qualify row_number() over (partition by group_id order by mean_accuracy desc, trial_id) = 1
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
        final_eval.group_id,
        final_eval.group_label,
        final_eval.digits,
        bool_and(final_eval.in_distribution) as in_distribution,
        count(*) as n_trials,
        avg(final_eval.accuracy) as mean,
        stddev_samp(final_eval.accuracy) as sd,
        min(final_eval.accuracy) as min,
        median(final_eval.accuracy) as median,
        max(final_eval.accuracy) as max,
        max(final_eval.accuracy) filter (
            where final_eval.trial_id = best_trials.best_trial_id
        ) as best_of_n,
        any_value(best_trials.best_trial_id) as best_trial_id
    from final_eval
    inner join best_trials using (group_id)
    group by final_eval.group_id, final_eval.group_label, final_eval.digits
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
        best_trial_id,
        mean - t_quantile * sd / sqrt(n_trials) as ci95_t_low,
        mean + t_quantile * sd / sqrt(n_trials) as ci95_t_high
    from with_quantile
)

select *
from final
order by group_label, group_id, digits
