-- reads: checked_level, finished_eval, length_list, missing_lengths, mls_low, replicate_coverage, replicate_high
-- one row per: group × component × length (and the mean of lengths)
-- parameters: `digits` (all OOD lengths), `level` (0.95)
-- Seed luck or numerical chaos? For every configuration group whose trials cross
-- weight seeds, data seeds and perturbation replicates (seeds.perturb: the same seeds
-- with one initial weight moved by one ulp, Summers & Dinneen 2021, arXiv 2103.04514):
-- how much of the variance of accuracy comes from the weight seed, the data seed,
-- their interaction, and numerical noise (what one ulp at initialisation does). One
-- row per (group, component, at_digits): at_digits 0 is a trial's mean accuracy over
-- the measured lengths (the out-of-distribution ones, or `digits`), other values that
-- length alone. A group that cannot be split gets one row with `skipped_reason`; a
-- trial without an accuracy at one of the group's lengths has no mean over them, and
-- the reason names it and the lengths it lacks.
--
-- The split needs a balanced design: a weight seeds x b data seeds x r perturb seeds,
-- each at least 2, every trial measured: the two-way random-effects ANOVA with
-- replication (Searle, Casella & McCulloch, "Variance Components", 1992, §4.7), its
-- sums of squares and moment estimates in docs/analysis.md. `estimate` keeps a negative
-- difference (unbiased); `sigma2` is it truncated at 0, and `share` is sigma2 over the
-- sum of the four.
--
-- Intervals (`low`, `high`, at `level`): the modified large-sample interval of each
-- (S1 − S2)/c (macros mls_low, mls_high in macros.sql; exact chi-square for the noise;
-- where replicates or trials tie, the bounds of ties; upper bounds at most 0.25),
-- coverage measured by simulation (tests/test_replicates.py, docs/analysis.md) and
-- printed in `coverage`: at the nearest design, and for groups whose mean is above 0.8
-- or below 0.2 the coverage measured near accuracy 1 (the noise's falls to 0.67-0.81).
-- Parameters: digits (default: the out-of-distribution lengths, e.g. '8,16'), level (0.95).

with

params as (
    select
        length_list(getvariable('digits')) as digits,
        checked_level(getvariable('level'), 0.5, 0.999) as level
),

measured as (
    select
        finished_eval.group_id,
        finished_eval.group_label,
        finished_eval.study,
        finished_eval.trial_id,
        finished_eval.weight_seed,
        finished_eval.data_seed,
        finished_eval.perturb_seed,
        finished_eval.digits,
        finished_eval.accuracy
    from finished_eval
    cross join params
    where case
        when params.digits is null then not finished_eval.in_distribution
        else list_contains(params.digits, finished_eval.digits)
    end
),

-- each trial without an accuracy at one of its group's lengths has no mean over them
short_trials as (select * from missing_lengths(measured)),

-- y per seed triple at each length and over all (at_digits 0); a triple run in two
-- studies averages them; means add in a fixed order, so row order never moves a bit
trial_values as (
    select
        group_id,
        weight_seed,
        data_seed,
        perturb_seed,
        digits as at_digits,
        list_avg(list(accuracy order by accuracy)) as y,
        bool_and(accuracy is not null) as has_value
    from measured
    group by group_id, weight_seed, data_seed, perturb_seed, digits
    union all
    select
        measured.group_id,
        measured.weight_seed,
        measured.data_seed,
        measured.perturb_seed,
        0 as at_digits,
        list_avg(list(measured.accuracy order by measured.digits, measured.accuracy)) as y,
        bool_and(short_trials.trial_id is null) as has_value
    from measured
    left join short_trials using (group_id, study, trial_id)
    group by measured.group_id, measured.weight_seed, measured.data_seed, measured.perturb_seed
),

design as (
    select
        group_id,
        at_digits,
        count(distinct weight_seed) as a,
        count(distinct data_seed) as b,
        count(distinct perturb_seed) as r,
        count(*) filter (where has_value) as n_measured
    from trial_values
    group by group_id, at_digits
),

balanced as (
    select *
    from design
    where a >= 2 and b >= 2 and r >= 2 and n_measured = a * b * r
),

cell_means as (
    select
        trial_values.group_id,
        trial_values.at_digits,
        trial_values.weight_seed,
        trial_values.data_seed,
        list_avg(list(trial_values.y order by trial_values.perturb_seed)) as m_wd
    from trial_values
    semi join balanced using (group_id, at_digits)
    group by trial_values.group_id, trial_values.at_digits, trial_values.weight_seed, trial_values.data_seed
),

-- each cell with its weight, data and grand means, added in a fixed order
cell_effects as (
    select
        *,
        list_avg(list(m_wd order by data_seed) over (partition by group_id, at_digits, weight_seed)) as m_w,
        list_avg(list(m_wd order by weight_seed) over (partition by group_id, at_digits, data_seed)) as m_d,
        list_avg(list(m_wd order by weight_seed, data_seed) over (partition by group_id, at_digits)) as m
    from cell_means
),

noise as (
    select
        trial_values.group_id,
        trial_values.at_digits,
        list_sum(list(
            (trial_values.y - cell_means.m_wd) ^ 2
            order by trial_values.weight_seed, trial_values.data_seed, trial_values.perturb_seed
        )) as ss_noise
    from trial_values
    inner join cell_means using (group_id, at_digits, weight_seed, data_seed)
    group by trial_values.group_id, trial_values.at_digits
),

two_way_sums as (
    select
        group_id,
        at_digits,
        list_sum(list((m_w - m) ^ 2 order by weight_seed, data_seed)) as weight_sum,
        list_sum(list((m_d - m) ^ 2 order by weight_seed, data_seed)) as data_sum,
        list_sum(list((m_wd - m_w - m_d + m) ^ 2 order by weight_seed, data_seed)) as interaction_sum
    from cell_effects
    group by group_id, at_digits
),

-- the sums run over the a x b cells, so r times each is its SS (weight_sum = b Σ_w (m_w − m)²)
mean_squares as (
    select
        balanced.group_id,
        balanced.at_digits,
        balanced.a,
        balanced.b,
        balanced.r,
        balanced.r * two_way_sums.weight_sum / (balanced.a - 1) as ms_weight,
        balanced.r * two_way_sums.data_sum / (balanced.b - 1) as ms_data,
        balanced.r * two_way_sums.interaction_sum / ((balanced.a - 1) * (balanced.b - 1)) as ms_interaction,
        noise.ss_noise / (balanced.a * balanced.b * (balanced.r - 1)) as ms_noise
    from balanced
    inner join two_way_sums using (group_id, at_digits)
    inner join noise using (group_id, at_digits)
),

-- each component as (S1 − S2)/c with the degrees of freedom of S1 and S2
differences as (
    select group_id, at_digits, a, b, r, 'weight' as component, 1 as component_order,
        ms_weight as s1, a - 1 as n1, ms_interaction as s2, (a - 1) * (b - 1) as n2, b * r as c
    from mean_squares
    union all
    select group_id, at_digits, a, b, r, 'data', 2,
        ms_data, b - 1, ms_interaction, (a - 1) * (b - 1), a * r
    from mean_squares
    union all
    select group_id, at_digits, a, b, r, 'weight x data', 3,
        ms_interaction, (a - 1) * (b - 1), ms_noise, a * b * (r - 1), r
    from mean_squares
    union all
    select group_id, at_digits, a, b, r, 'numerical noise', 4,
        ms_noise, a * b * (r - 1), 0.0, 1, 1
    from mean_squares
),

-- the upper bound: where trials tie, the bounds of ties (macros.sql); at most 0.25
intervals as (
    select
        differences.*,
        params.level,
        (differences.s1 - differences.s2) / differences.c as estimate,
        mls_low(differences.s1, differences.n1, differences.s2, differences.n2, differences.c, params.level)
            as low,
        replicate_high(differences.component, differences.s1, differences.n1, differences.s2, differences.n2,
            differences.c, mean_squares.ms_weight + mean_squares.ms_data + mean_squares.ms_interaction
            + mean_squares.ms_noise, least(differences.a, differences.b), params.level) as high
    from differences
    inner join mean_squares using (group_id, at_digits)
    cross join params
),

totals as (
    select
        group_id,
        at_digits,
        list_sum(list(greatest(0, estimate) order by component)) as total
    from intervals
    group by group_id, at_digits
),

grand_means as (
    select
        group_id,
        at_digits,
        any_value(m) as grand_mean
    from cell_effects
    group by group_id, at_digits
),

labels as (
    select
        group_id,
        any_value(group_label) as group_label
    from measured
    group by group_id
),

split as (
    select
        intervals.group_id,
        labels.group_label,
        intervals.at_digits,
        intervals.a as weight_seeds,
        intervals.b as data_seeds,
        intervals.r as perturb_seeds,
        intervals.component,
        intervals.estimate,
        greatest(0, intervals.estimate) as sigma2,
        greatest(0, intervals.estimate) / nullif(totals.total, 0) as share,
        intervals.low,
        intervals.high,
        intervals.level,
        replicate_coverage(intervals.component, intervals.a, intervals.b, grand_means.grand_mean) as coverage,
        null as skipped_reason
    from intervals
    inner join totals using (group_id, at_digits)
    inner join grand_means using (group_id, at_digits)
    inner join labels using (group_id)
),

-- the trials a group's mean over lengths leaves out, and the lengths each lacks
left_out as (
    select
        group_id,
        string_agg(trial_id || ' (no accuracy at ' || array_to_string(missing, ', ') || ' digits)',
            ', ' order by trial_id, study) as trials
    from short_trials
    group by group_id
),

skipped as (
    select
        design.group_id,
        labels.group_label,
        design.at_digits,
        design.a as weight_seeds,
        design.b as data_seeds,
        design.r as perturb_seeds,
        case
            when design.r < 2 then
                'no perturbation replicates (seeds.perturb): the weight x data interaction and '
                || 'numerical noise cannot be told apart'
            when design.a < 2 or design.b < 2 then 'needs at least 2 weight seeds and 2 data seeds'
            else 'needs every weight x data x perturb seed measured: ' || design.n_measured
                || ' of ' || design.a * design.b * design.r || ' are'
        end || coalesce('; left out: ' || left_out.trials, '') as skipped_reason
    from design
    inner join labels using (group_id)
    left join left_out using (group_id)
    anti join balanced using (group_id, at_digits)
    where design.at_digits = 0
),

final as (
    select *
    from split
    union all by name
    select *
    from skipped
)

select *
from final
order by
    group_label,
    group_id,
    at_digits,
    list_position(['weight', 'data', 'weight x data', 'numerical noise'], component) nulls first
