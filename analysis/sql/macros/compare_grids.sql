-- reads:
-- Which cells does a comparison of two configuration groups use, and in which grids?
-- Table macros, defined on every connection (analysis.query.prepare_connection), for
-- compare.sql:
--
--   comparison_parts(pairs_table, cells_table, threshold)
--       over the pairs of groups (group_a, group_b) of pairs_table and the cells of
--       cells_table (group_id, weight_seed, data_seed, digits, accuracy: one per seed
--       pair), one row per cell of each part of each comparison: key = {group_a,
--       group_b, digits, design, part}, weight_seed, data_seed, y. The design is
--       'paired' when both groups measured the same seed pairs (at least 2), 'partly
--       paired' when they share some, else 'unpaired'. Parts: 'a' and 'b' (each group's
--       accuracies), 'success a' and 'success b' (1 where the accuracy reaches
--       threshold), and paired: 'difference' (y^a − y^b) and 'wins' (1 where a scores
--       above b, ½ on a tie); otherwise 'place a' and 'place b', each seed pair's share
--       of wins over the other group's seed pairs that share no seed with it (its
--       placement value, DeLong et al. 1988; a seed kind held at one value by both
--       groups is not shared luck).
--   comparison_extras(parts_table)
--       per comparison: phi, the correlation of the two groups' successes over their
--       shared seed pairs (paired, at least 5 pairs, both varying; else 0: estimated on
--       4 pairs it covered 0.87, docs/analysis.md), and apart_wins, P(a > b) over every
--       pair of seed pairs sharing no seed (not paired).

create or replace macro comparison_parts(pairs_table, cells_table, threshold) as table
with

sides as (
    select pairs.group_a, pairs.group_b, 'a' as side, cells.*
    from query_table(pairs_table) as pairs
    inner join query_table(cells_table) as cells on cells.group_id = pairs.group_a
    union all
    select pairs.group_a, pairs.group_b, 'b' as side, cells.*
    from query_table(pairs_table) as pairs
    inner join query_table(cells_table) as cells on cells.group_id = pairs.group_b
),

matched as (
    select
        group_a,
        group_b,
        digits,
        weight_seed,
        data_seed,
        any_value(accuracy) filter (where side = 'a') as accuracy_a,
        any_value(accuracy) filter (where side = 'b') as accuracy_b
    from sides
    group by group_a, group_b, digits, weight_seed, data_seed
),

designs as (
    select
        group_a,
        group_b,
        digits,
        case
            when count(*) filter (where accuracy_a is null or accuracy_b is null) = 0
                and count(*) >= 2 then 'paired'
            when count(*) filter (where accuracy_a is not null and accuracy_b is not null) > 0
                then 'partly paired'
            else 'unpaired'
        end as design
    from matched
    group by group_a, group_b, digits
    having count(accuracy_a) >= 1 and count(accuracy_b) >= 1
),

designed as (
    select matched.*, designs.design
    from matched
    inner join designs using (group_a, group_b, digits)
),

-- a seed kind that both groups hold at one value (say data seed 0) is no luck to share
held as (
    select
        group_a,
        group_b,
        digits,
        count(distinct weight_seed) = 1 as weight_held,
        count(distinct data_seed) = 1 as data_held
    from designed
    group by group_a, group_b, digits
),

-- every pair of a's and b's seed pairs that share no seed that varies, with a's wins
apart as (
    select
        a.group_a,
        a.group_b,
        a.digits,
        a.design,
        a.weight_seed as weight_a,
        a.data_seed as data_a,
        b.weight_seed as weight_b,
        b.data_seed as data_b,
        (a.accuracy_a > b.accuracy_b)::double + 0.5 * (a.accuracy_a = b.accuracy_b)::double as wins
    from designed as a
    inner join designed as b using (group_a, group_b, digits)
    inner join held using (group_a, group_b, digits)
    where a.design <> 'paired' and a.accuracy_a is not null and b.accuracy_b is not null
        and (a.weight_seed <> b.weight_seed or held.weight_held)
        and (a.data_seed <> b.data_seed or held.data_held)
),

final as (
    select {'group_a': group_a, 'group_b': group_b, 'digits': digits, 'design': design, 'part': part} as key,
        weight_seed, data_seed, y
    from designed
    cross join lateral (
        select * from (values
            ('a', accuracy_a),
            ('b', accuracy_b),
            ('success a', (accuracy_a >= threshold)::double),
            ('success b', (accuracy_b >= threshold)::double),
            ('difference', case when design = 'paired' then accuracy_a - accuracy_b end),
            ('wins', case when design = 'paired' then (accuracy_a > accuracy_b)::double
                + 0.5 * (accuracy_a = accuracy_b)::double end)
        ) as part_values(part, y)
    )
    where y is not null
    union all
    select {'group_a': group_a, 'group_b': group_b, 'digits': digits, 'design': design, 'part': 'place a'},
        weight_a, data_a, list_avg(list(wins order by weight_b, data_b))
    from apart
    group by group_a, group_b, digits, design, weight_a, data_a
    union all
    select {'group_a': group_a, 'group_b': group_b, 'digits': digits, 'design': design, 'part': 'place b'},
        weight_b, data_b, list_avg(list(wins order by weight_a, data_a))
    from apart
    group by group_a, group_b, digits, design, weight_b, data_b
)

select *
from final;

create or replace macro comparison_extras(parts_table) as table
with

successes as (
    select
        key.group_a,
        key.group_b,
        key.digits,
        weight_seed,
        data_seed,
        any_value(y) filter (where key.part = 'success a') as success_a,
        any_value(y) filter (where key.part = 'success b') as success_b,
        any_value(y) filter (where key.part = 'place a') as place_a
    from query_table(parts_table)
    where key.part in ('success a', 'success b', 'place a')
    group by key.group_a, key.group_b, key.digits, weight_seed, data_seed
),

-- sums in the seeds' order: the same cells give the same bits in any row order
centred as (
    select
        *,
        success_a - list_avg(list(success_a order by weight_seed, data_seed) over comparison) as centred_a,
        success_b - list_avg(list(success_b order by weight_seed, data_seed) over comparison) as centred_b
    from successes
    window comparison as (partition by group_a, group_b, digits)
),

final as (
    select
        group_a,
        group_b,
        digits,
        case
            when count(success_a) filter (where success_b is not null) >= 5
                and list_sum(list(centred_a ^ 2)) > 0 and list_sum(list(centred_b ^ 2)) > 0
                then list_sum(list(centred_a * centred_b order by weight_seed, data_seed))
                    / sqrt(list_sum(list(centred_a ^ 2 order by weight_seed, data_seed))
                        * list_sum(list(centred_b ^ 2 order by weight_seed, data_seed)))
            else 0
        end as phi,
        -- every a seed pair has the same number of partners in a complete grid; in
        -- general the mean over pairs weights each by its partners
        list_avg(list(place_a order by weight_seed, data_seed)) as apart_wins
    from centred
    group by group_a, group_b, digits
)

select *
from final;
