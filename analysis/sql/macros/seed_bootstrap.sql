-- reads: draw_index, grid_anova, percentile_high, percentile_low
-- How far would the variance components and shares of a configuration group move if
-- its seeds were drawn again? Kept for comparison with seed_components.sql's intervals
-- (lucky_tickets.sql's columns *_boot_low, *_boot_high): the percentile bootstrap over
-- both seeds at once, as the table macro seed_bootstrap(grids_table, n_resamples,
-- seed, at_level), defined on every connection (analysis.query.prepare_connection):
-- per (group_id, at_digits) of grids_table (seed_components.sql describes it), the
-- intervals of every component and share, and boot_undefined.
--
-- A replicate draws a weight seeds and b data seeds of the subgrid with replacement
-- (the same draws at every length) and recomputes every statistic (grid_anova,
-- seed_components.sql) on the a x b table of the drawn rows and columns; the interval
-- is the (1 − level)/2 and (1 + level)/2 quantiles of the `n_resamples` replicates
-- (linear interpolation, as quantile_cont). The draws come from
-- hash(hash(seed, group, side, replicate, draw)), so the same parameters give the
-- same result; the outer hash because DuckDB combines the hashes of several arguments
-- so that their low bits only XOR (8 draws of 8 seeds came out as a fixed pattern).
-- Replicates whose table is constant have no shares and are left out of the share
-- intervals (boot_undefined counts them). The bootstrap shrinks the components and
-- does not hold its level with few seeds: its 95 % interval of the weight share covered
-- the truth in 0.88 of simulated 3 x 5 studies and 0.93 of 8 x 8 ones (docs/analysis.md).

create or replace macro seed_bootstrap(grids_table, n_resamples, seed, at_level) as table
with

params as (
    select
        n_resamples as resamples,
        seed as boot_seed,
        at_level as level
),

replicates as (
    select
        grids.*,
        unnest(range(1, params.resamples + 1)) as replicate
    from query_table(grids_table) as grids
    cross join params
),

-- the drawn rows (weight seeds) and columns (data seeds), as 0-based indices
draws as (
    select
        replicates.*,
        [
            draw_index(hash(hash(params.boot_seed, replicates.group_id, 'weight',
                replicates.replicate, draw)), replicates.a)
            for draw in range(replicates.a)
        ] as drawn_rows,
        [
            draw_index(hash(hash(params.boot_seed, replicates.group_id, 'data',
                replicates.replicate, draw)), replicates.b)
            for draw in range(replicates.b)
        ] as drawn_columns
    from replicates
    cross join params
),

-- each replicate's table: the drawn rows x the drawn columns
tables as (
    select
        group_id,
        at_digits,
        replicate,
        a,
        b,
        [[grid[1 + i * b + j] for j in drawn_columns] for i in drawn_rows] as cells
    from draws
),

-- materialized: two CTEs read it, and DuckDB would otherwise run the resampling again
-- for each
estimates as materialized (
    select *
    from grid_anova(tables)
),

-- percentile intervals over the replicates (unpivot leaves out undefined shares)
replicate_values as (
    unpivot (
        select
            group_id,
            at_digits,
            replicate,
            sigma2_weight,
            sigma2_data,
            sigma2_residual,
            component_share_weight,
            component_share_data,
            component_share_residual,
            ss_share_weight,
            ss_share_data,
            ss_share_residual
        from estimates
    )
    on sigma2_weight, sigma2_data, sigma2_residual, component_share_weight,
        component_share_data, component_share_residual, ss_share_weight, ss_share_data,
        ss_share_residual
    into name quantity value value
),

replicate_sorted as (
    select
        group_id,
        at_digits,
        quantity,
        list_sort(list(value)) as sorted
    from replicate_values
    group by group_id, at_digits, quantity
),

percentiles as (
    select
        replicate_sorted.group_id,
        replicate_sorted.at_digits,
        replicate_sorted.quantity,
        percentile_low(replicate_sorted.sorted, params.level) as low,
        percentile_high(replicate_sorted.sorted, params.level) as high
    from replicate_sorted
    cross join params
),

intervals as (
    pivot percentiles
    on quantity in (
        'sigma2_weight', 'sigma2_data', 'sigma2_residual', 'component_share_weight',
        'component_share_data', 'component_share_residual', 'ss_share_weight',
        'ss_share_data', 'ss_share_residual'
    )
    using any_value(low) as boot_low, any_value(high) as boot_high
    group by group_id, at_digits
),

undefined_replicates as (
    select
        group_id,
        at_digits,
        count(*) filter (where not varies) as boot_undefined
    from estimates
    group by group_id, at_digits
),

final as (
    select *
    from undefined_replicates
    left join intervals using (group_id, at_digits)
)

select *
from final;
