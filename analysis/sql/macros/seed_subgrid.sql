-- reads: grid_size
-- Which seeds of a configuration group form its largest complete subgrid, the
-- crossed design the seed analysis uses (lucky_tickets.sql)? The table macro
-- largest_complete_subgrid(cells_table), defined on every connection
-- (analysis.query.prepare_connection), takes seed_grid_cells' rows (seed_grid.sql:
-- group_id, weight_seed, data_seed, measured) and returns the cells (group_id,
-- weight_seed, data_seed) of each group's largest complete subgrid: the set of weight
-- seeds x data seeds, each at least 2, with every cell measured and the most cells
-- (ties: the first seeds in order), searched over the subsets of the side with fewer
-- seeds when it has at most 16. With more than 16 seeds on each side a complete grid
-- is its own subgrid, and an incomplete one drops every seed of one side that has a
-- missing cell (the side whose dropping keeps more cells; ties: weight seeds): a large
-- complete subgrid, not always the largest. A group with no complete 2 x 2 subgrid has
-- no rows.

create or replace macro largest_complete_subgrid(cells_table) as table
with

grid_cells as (
    select *
    from query_table(cells_table)
),

grid_size as (
    select *
    from grid_size(cells_table)
),

-- the largest complete subgrid: enumerate the subsets of the side with fewer seeds
oriented as (
    select
        grid_cells.*,
        case
            when grid_size.grid_weight_seeds <= grid_size.grid_data_seeds
                then grid_cells.weight_seed
            else grid_cells.data_seed
        end as enum_seed,
        case
            when grid_size.grid_weight_seeds <= grid_size.grid_data_seeds
                then grid_cells.data_seed
            else grid_cells.weight_seed
        end as other_seed
    from grid_cells
    inner join grid_size using (group_id)
),

enumerated as (
    select
        *,
        dense_rank() over (partition by group_id order by enum_seed) - 1 as enum_index
    from oriented
),

sides as (
    select
        group_id,
        max(enum_index) + 1 as k,
        bool_and(measured) as complete
    from enumerated
    group by group_id
),

-- per seed of the other side: the set (bits) of enumerated seeds it has measured
measured_sets as (
    select
        group_id,
        other_seed,
        coalesce(bit_or(1::bigint << enum_index) filter (where measured), 0) as have
    from enumerated
    group by group_id, other_seed
),

masks as (
    select
        group_id,
        k,
        unnest(range(1::bigint, 1::bigint << k)) as mask
    from sides
    where k <= 16
),

candidates as (
    select
        masks.group_id,
        masks.mask,
        bit_count(masks.mask) * count(*) as area
    from masks
    inner join measured_sets
        on measured_sets.group_id = masks.group_id
        and measured_sets.have & masks.mask = masks.mask
    where bit_count(masks.mask) >= 2
    group by masks.group_id, masks.mask
    having count(*) >= 2
),

best_masks as (
    select
        group_id,
        mask
    from candidates
    qualify row_number() over (partition by group_id order by area desc, mask) = 1
),

searched_subgrid as (
    select
        enumerated.group_id,
        enumerated.weight_seed,
        enumerated.data_seed
    from enumerated
    inner join best_masks using (group_id)
    inner join measured_sets using (group_id, other_seed)
    where
        (best_masks.mask >> enumerated.enum_index) & 1 = 1
        and measured_sets.have & best_masks.mask = best_masks.mask
),

-- more than 16 seeds on each side: a complete grid is its own subgrid; an incomplete one
-- drops every seed of one side that has a missing cell, the side whose dropping keeps
-- more cells (ties: weight seeds go), a complete subgrid found without a search
full_weight_seeds as (
    select
        group_id,
        weight_seed
    from grid_cells
    group by group_id, weight_seed
    having bool_and(measured)
),

full_data_seeds as (
    select
        group_id,
        data_seed
    from grid_cells
    group by group_id, data_seed
    having bool_and(measured)
),

large_sides as (
    select
        sides.group_id,
        grid_size.grid_data_seeds * (
            select count(*) from full_weight_seeds where full_weight_seeds.group_id = sides.group_id
        ) as cells_keeping_full_weight_seeds,
        grid_size.grid_weight_seeds * (
            select count(*) from full_data_seeds where full_data_seeds.group_id = sides.group_id
        ) as cells_keeping_full_data_seeds
    from sides
    inner join grid_size using (group_id)
    where sides.k > 16
),

large_subgrid as (
    select
        grid_cells.group_id,
        grid_cells.weight_seed,
        grid_cells.data_seed
    from grid_cells
    inner join large_sides using (group_id)
    where case
        when large_sides.cells_keeping_full_weight_seeds >= large_sides.cells_keeping_full_data_seeds
            then grid_cells.weight_seed in (
                select full_weight_seeds.weight_seed from full_weight_seeds
                where full_weight_seeds.group_id = grid_cells.group_id
            )
        else grid_cells.data_seed in (
            select full_data_seeds.data_seed from full_data_seeds
            where full_data_seeds.group_id = grid_cells.group_id
        )
    end
),

-- at least 2 seeds on each side, as the search asks
large_subgrid_kept as (
    select large_subgrid.*
    from large_subgrid
    semi join (
        select group_id
        from large_subgrid
        group by group_id
        having count(distinct weight_seed) >= 2 and count(distinct data_seed) >= 2
    ) as wide_enough using (group_id)
),

final as (
    select * from searched_subgrid
    union all
    select * from large_subgrid_kept
)

select *
from final;
