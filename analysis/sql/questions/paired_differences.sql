-- reads: finished_eval, length_list
-- one row per: shared seed pair
-- parameters: `group_a`, `group_b` (group ids), `digits` (the OOD lengths both measured)
-- How do two groups differ on the seed pairs they share (`lg-study plan --compare`,
-- analysis/comparison_planning.py)? Per shared seed pair: group_a's accuracy minus
-- group_b's, each the mean over the lengths read (`digits`, or every length both groups
-- measured out of distribution) of the mean of the seed pair's trials (one per study),
-- as compare.sql's cells; a seed pair missing one of those lengths is left out.
-- `lengths` lists the lengths read.
-- Parameters: group_a, group_b (group ids; no rows without them), digits (e.g. '8').

with

params as (
    select
        cast(getvariable('group_a') as varchar) as group_a,
        cast(getvariable('group_b') as varchar) as group_b,
        length_list(getvariable('digits')) as digits
),

cells as (
    select
        finished_eval.group_id,
        finished_eval.weight_seed,
        finished_eval.data_seed,
        finished_eval.digits,
        bool_or(finished_eval.in_distribution) as in_distribution,
        list_avg(list(finished_eval.accuracy order by finished_eval.accuracy)) as accuracy
    from finished_eval
    cross join params
    where finished_eval.accuracy is not null
        and finished_eval.group_id in (params.group_a, params.group_b)
    group by finished_eval.group_id, finished_eval.weight_seed, finished_eval.data_seed, finished_eval.digits
),

lengths as (
    select cells.digits
    from cells
    cross join params
    where coalesce(list_contains(params.digits, cells.digits), not cells.in_distribution)
    group by cells.digits
    having count(distinct cells.group_id) = 2
),

seed_pairs as (
    select
        group_id,
        weight_seed,
        data_seed,
        list_avg(list(accuracy order by digits)) as y
    from cells
    semi join lengths using (digits)
    group by group_id, weight_seed, data_seed
    having count(*) = (select count(*) from lengths)
),

final as (
    select
        a.weight_seed,
        a.data_seed,
        a.y - b.y as difference,
        (select list(digits order by digits) from lengths) as lengths
    from seed_pairs as a
    inner join seed_pairs as b using (weight_seed, data_seed)
    cross join params
    where a.group_id = params.group_a and b.group_id = params.group_b
)

select *
from final
order by weight_seed, data_seed
