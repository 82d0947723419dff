-- reads: final_eval
-- Which cells of a configuration group's seed grid did its trials measure, and what
-- does the seed analysis leave out (lucky_tickets.sql)? Table macros, defined on every
-- connection (analysis.query.prepare_connection):
--
--   seed_grid_cells(design_table, values_table)
--       every cell (weight seed x data seed) of every group whose trials span at least
--       2 weight seeds and 2 data seeds, whatever their status: whether a trial of the
--       group measured it and, if not, why (`reason`: "failed", "not finished",
--       "diverged before its first evaluation", "no evaluation", "no accuracy at the
--       measured lengths", or "no trial"). design_table: the groups' trials (group_id,
--       study, trial_id, weight_seed, data_seed, status, finished); values_table: their
--       measured value (study, trial_id, at_digits, y; at_digits 0 is the one read,
--       y null: unmeasured).
--   subgrid_coverage(cells_table, subgrid_table)
--       per group of seed_grid_cells: the grid's size, its missing cells (e.g. "w2 d3:
--       failed"), the seeds that the subgrid (largest_complete_subgrid, seed_subgrid.sql)
--       leaves out, and why a group has none (skipped_reason).

-- grid_size(cells_table): each group's count of distinct weight seeds and of distinct
-- data seeds in a table of its trials or cells (group_id, weight_seed, data_seed): the
-- size of the crossed grid they span, which seed_grid_cells, subgrid_coverage and
-- largest_complete_subgrid (seed_subgrid.sql) read.

create or replace macro grid_size(cells_table) as table
select
    group_id,
    count(distinct weight_seed) as grid_weight_seeds,
    count(distinct data_seed) as grid_data_seeds
from query_table(cells_table)
group by group_id;

create or replace macro seed_grid_cells(design_table, values_table) as table
with

evaluated as (
    select distinct
        study,
        trial_id
    from final_eval
),

-- why a trial gives its cell no value (null when it does)
trial_reasons as (
    select
        design.group_id,
        design.weight_seed,
        design.data_seed,
        design.status,
        trial_values.y is not null as has_value,
        case
            when trial_values.y is not null then null
            when design.status = 'failed' then 'failed'
            when not design.finished then 'not finished'
            when evaluated.trial_id is null and design.status = 'diverged'
                then 'diverged before its first evaluation'
            when evaluated.trial_id is null then 'no evaluation'
            else 'no accuracy at the measured lengths'
        end as reason
    from query_table(design_table) as design
    left join query_table(values_table) as trial_values
        on trial_values.study = design.study
        and trial_values.trial_id = design.trial_id
        and trial_values.at_digits = 0
    left join evaluated
        on evaluated.study = design.study
        and evaluated.trial_id = design.trial_id
),

grid_size as (
    select *
    from grid_size(design_table)
    where grid_weight_seeds >= 2 and grid_data_seeds >= 2
),

grid as (
    select
        weights.group_id,
        weights.weight_seed,
        data.data_seed
    from (select distinct group_id, weight_seed from query_table(design_table)) as weights
    inner join (select distinct group_id, data_seed from query_table(design_table)) as data using (group_id)
    inner join grid_size using (group_id)
),

final as (
    select
        grid.group_id,
        grid.weight_seed,
        grid.data_seed,
        coalesce(bool_or(trial_reasons.has_value), false) as measured,
        coalesce(
            string_agg(distinct trial_reasons.reason, ', ' order by trial_reasons.reason),
            'no trial'
        ) as reason
    from grid
    left join trial_reasons using (group_id, weight_seed, data_seed)
    group by grid.group_id, grid.weight_seed, grid.data_seed
)

select *
from final;

create or replace macro subgrid_coverage(cells_table, subgrid_table) as table
with

grid_cells as (
    select *
    from query_table(cells_table)
),

subgrid as (
    select *
    from query_table(subgrid_table)
),

grid_size as (
    select *
    from grid_size(cells_table)
),

coverage as (
    select
        grid_cells.group_id,
        any_value(grid_size.grid_weight_seeds) as grid_weight_seeds,
        any_value(grid_size.grid_data_seeds) as grid_data_seeds,
        list(
            'w' || grid_cells.weight_seed || ' d' || grid_cells.data_seed || ': '
            || grid_cells.reason
            order by grid_cells.weight_seed, grid_cells.data_seed
        ) filter (where not grid_cells.measured) as missing_cells,
        case
            when count(subgrid.group_id) = 0
                and least(any_value(grid_size.grid_weight_seeds), any_value(grid_size.grid_data_seeds)) > 16
                then 'no complete 2 x 2 subgrid left after dropping the seeds with missing cells '
                    || '(more than 16 seeds on each side: not searched seed set by seed set)'
            when count(subgrid.group_id) = 0
                then 'no complete 2 x 2 subgrid of measured trials'
        end as skipped_reason
    from grid_cells
    inner join grid_size using (group_id)
    left join subgrid using (group_id, weight_seed, data_seed)
    group by grid_cells.group_id
),

-- seeds of analysed groups that the subgrid leaves out
left_out_seeds as (
    select
        grid.group_id,
        'weight seed ' || grid.weight_seed as seed,
        0 as side,
        grid.weight_seed as seed_value
    from (select distinct group_id, weight_seed from grid_cells) as grid
    semi join subgrid using (group_id)
    anti join subgrid using (group_id, weight_seed)
    union all
    select
        grid.group_id,
        'data seed ' || grid.data_seed,
        1,
        grid.data_seed
    from (select distinct group_id, data_seed from grid_cells) as grid
    semi join subgrid using (group_id)
    anti join subgrid using (group_id, data_seed)
),

left_out as (
    select
        group_id,
        list(seed order by side, seed_value) as seeds
    from left_out_seeds
    group by group_id
),

final as (
    select
        coverage.*,
        left_out.seeds as left_out_seeds
    from coverage
    left join left_out using (group_id)
)

select *
from final;
