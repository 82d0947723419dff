-- reads: finished_eval, length_list, trial_length_values
-- one row per: one-way group × length (and the mean of lengths)
-- parameters: `digits` (all OOD lengths)
-- Which groups vary one seed kind only, and what does that say for seed planning
-- (`lg-study plan`, analysis/seed_planning.py)? For every configuration group whose
-- finished trials run at least 2 seeds of one kind (weight or data) and one seed of the
-- other, held fixed: the seed kind varied, the seed held, the number of seeds k, their
-- mean m and the variance s² of the seeds' values (k − 1 degrees of freedom). One row
-- per (group, at_digits): at_digits 0 is a trial's mean accuracy over the measured
-- lengths (the out-of-distribution ones, or `digits`), other values that length alone.
--
-- A seed's value is its trial's accuracy (the mean of its trials when it has several:
-- perturbation replicates, or one trial in two studies). A trial without an accuracy at
-- one of the group's lengths has none over them: `left_out` counts those trials, and
-- they are not among the k. With the other seed kind held, s² holds the varied seed's
-- variance and the rest (σ²_weight + σ²_residual for weight seeds); the held kind's
-- variance is in no row, and a plan from it says so.
-- Parameters: digits (default: the out-of-distribution lengths, e.g. '8,16').

with

params as (
    select length_list(getvariable('digits')) as digits
),

measured as (
    select
        finished_eval.group_id,
        finished_eval.group_label,
        finished_eval.study,
        finished_eval.trial_id,
        finished_eval.weight_seed,
        finished_eval.data_seed,
        finished_eval.digits,
        finished_eval.accuracy
    from finished_eval
    cross join params
    where case
        when params.digits is null then not finished_eval.in_distribution
        else list_contains(params.digits, finished_eval.digits)
    end
),

-- a trial's y at each length and over all of them (null when it lacks one), with its seeds
trial_values as (
    select by_length.*, seeds.weight_seed, seeds.data_seed
    from trial_length_values(measured) as by_length
    inner join (select distinct study, trial_id, weight_seed, data_seed from measured) as seeds
        using (study, trial_id)
),

seed_values as (
    select
        group_id,
        at_digits,
        weight_seed,
        data_seed,
        list_avg(list(y order by study, trial_id)) as y
    from trial_values
    where y is not null
    group by group_id, at_digits, weight_seed, data_seed
),

shapes as (
    select
        group_id,
        at_digits,
        count(distinct weight_seed) as a,
        count(distinct data_seed) as b,
        count(*) as k,
        list_avg(list(y order by weight_seed, data_seed)) as mean
    from seed_values
    group by group_id, at_digits
    having (a >= 2 and b = 1) or (a = 1 and b >= 2)
),

spreads as (
    select
        shapes.group_id,
        shapes.at_digits,
        list_sum(list((seed_values.y - shapes.mean) ^ 2 order by seed_values.weight_seed, seed_values.data_seed))
            / (any_value(shapes.k) - 1) as variance
    from shapes
    inner join seed_values using (group_id, at_digits)
    group by shapes.group_id, shapes.at_digits
),

held as (
    select
        group_id,
        at_digits,
        any_value(case when shapes.a = 1 then weight_seed else data_seed end) as held_seed
    from seed_values
    inner join shapes using (group_id, at_digits)
    group by group_id, at_digits
),

left_out as (
    select
        group_id,
        at_digits,
        count(*) filter (where y is null) as left_out
    from trial_values
    group by group_id, at_digits
),

labels as (
    select
        group_id,
        any_value(group_label) as group_label
    from measured
    group by group_id
),

final as (
    select
        shapes.group_id,
        labels.group_label,
        shapes.at_digits,
        case when shapes.a = 1 then 'data' else 'weight' end as varied,
        held.held_seed,
        shapes.k as seeds,
        shapes.mean,
        spreads.variance,
        left_out.left_out
    from shapes
    inner join spreads using (group_id, at_digits)
    inner join held using (group_id, at_digits)
    inner join left_out using (group_id, at_digits)
    inner join labels using (group_id)
)

select *
from final
order by group_label, group_id, at_digits
