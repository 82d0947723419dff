-- reads: crossed_mean_df, crossed_mean_variance, normal_quantile, success_coverage, t_quantile, two_way_mean_squares, wilson_high, wilson_low
-- How sure is the share of a configuration group's seed pairs that succeed? The table
-- macro seed_success_interval(cells_table, level), defined on every connection
-- (analysis.query.prepare_connection), for success.sql and profiles.sql, so that the
-- success probability and the performance profile at the threshold are one interval.
-- cells_table holds one row per seed pair: key (what the interval is per, e.g. group
-- and test length), weight_seed, data_seed, s (the share of the seed pair's trials that
-- succeed) and y (their mean accuracy). Per key:
--
--   p         the seed pairs' mean of s; n_cells the seed pairs
--   low, high Wilson's score interval at an effective number of seed pairs, n_eff
--             (Korn & Graubard 1998, Survey Methodology 24, 193-201; Dean & Pagano 2015,
--             J. Survey Statistics and Methodology 3, 484-503). For a complete crossed
--             grid of a >= 2 weight x b >= 2 data seeds, V = the two-way random-effects
--             variance of p (crossed_mean_variance over the s) and
--             n_eff = min(p(1 − p)/V, n_cells) · (z / t_ν)², ν Satterthwaite's degrees
--             of freedom; when every cell or none succeeds, the s say nothing of how
--             successes cluster, and the design effect of the accuracies y stands in:
--             n_eff = n_cells / max(1, V_y / (s²_y / n_cells)) · (z / t_ν_y)².
--             Otherwise (one seed varies, or the grid has holes) n_eff = n_cells:
--             Wilson over the cells
--   method    which of these; n_eff as above (adjusted by (z / t_ν)²)
--   coverage  the coverage measured by simulation at the nearest design
--             (success_coverage; tests/test_success_interval.py, docs/analysis.md)
--
-- After the macros it calls: DuckDB binds them when it creates this one.

create or replace macro seed_success_interval(cells_table, level) as table
with

params as (
    select level as level, normal_quantile(level) as z
),

success_cells as (
    select key, weight_seed, data_seed, s as y
    from query_table(cells_table)
),

accuracy_cells as (
    select key, weight_seed, data_seed, y
    from query_table(cells_table)
),

-- the two-way mean squares of the success indicators and of the accuracies (macros.sql)
cell_squares as (
    select
        s.key,
        s.m as p,
        s.a,
        s.b,
        s.n_cells,
        s.crossed,
        s.ms_weight as s_ms_weight,
        s.ms_data as s_ms_data,
        s.ms_residual as s_ms_residual,
        y.ms_weight as y_ms_weight,
        y.ms_data as y_ms_data,
        y.ms_residual as y_ms_residual,
        y.ms_cells as y_ms_cells
    from two_way_mean_squares(success_cells) as s
    inner join two_way_mean_squares(accuracy_cells) as y using (key)
),

-- the effective number of cells and its degrees of freedom (see the header)
effective as (
    select
        key,
        p,
        n_cells,
        case
            when not crossed then 'independent cells (Wilson)'
            when p > 0 and p < 1 then 'crossed seeds (Wilson, effective n)'
            else 'crossed seeds, none or all succeed (Wilson, effective n of the accuracies)'
        end as method,
        case
            when not crossed then n_cells
            when p > 0 and p < 1 then least(
                p * (1 - p) / crossed_mean_variance(s_ms_weight, s_ms_data, s_ms_residual, a, b), n_cells)
            when y_ms_cells > 0 then n_cells / greatest(
                crossed_mean_variance(y_ms_weight, y_ms_data, y_ms_residual, a, b) * n_cells / y_ms_cells, 1)
            else n_cells
        end as n_eff,
        case
            when not crossed then null
            when p > 0 and p < 1 then crossed_mean_df(s_ms_weight, s_ms_data, s_ms_residual, a, b)
            else coalesce(crossed_mean_df(y_ms_weight, y_ms_data, y_ms_residual, a, b), n_cells - 1)
        end as df,
        a,
        b
    from cell_squares
),

-- n_eff scaled by (z / t_ν)², so that Wilson's interval with z widens as t_ν would
final as (
    select
        effective.key,
        effective.p,
        effective.n_cells,
        effective.method,
        adjusted.n as n_eff,
        case when effective.p = 0 then 0 else wilson_low(effective.p, adjusted.n, params.z) end as low,
        case when effective.p = 1 then 1 else wilson_high(effective.p, adjusted.n, params.z) end as high,
        success_coverage(effective.method, effective.a, effective.b) as coverage
    from effective
    cross join params
    cross join lateral (
        select effective.n_eff * case
            when effective.df is null then 1
            else (params.z / t_quantile((1 + params.level) / 2, greatest(effective.df, 1))) ^ 2
        end as n
    ) as adjusted
)

select * from final;
