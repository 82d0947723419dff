-- reads: normal_quantile, seed_df, seed_variance, success_coverage, t_quantile, two_way_mean_squares, wilson_high, wilson_low
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

-- A share over seed pairs (success.sql's rule, and compare.sql's): its effective number of seed pairs before
-- the t adjustment, from the squares of its indicators (s) and of the accuracies behind
-- them (y, whose design effect stands in when every cell or none succeeds), and its
-- degrees of freedom (null: Wilson with z, the cells counted as independent).

create or replace macro share_n_eff(s, y) as case
    when not s.crossed then s.n_cells
    when s.m > 0 and s.m < 1 then least(s.m * (1 - s.m) / seed_variance(s), s.n_cells)
    when y.ms_cells > 0 then s.n_cells / greatest(seed_variance(y) * s.n_cells / y.ms_cells, 1)
    else s.n_cells
end;

create or replace macro share_df(s, y) as case
    when not s.crossed then null
    when s.m > 0 and s.m < 1 then seed_df(s)
    else coalesce(seed_df(y), s.n_cells - 1)
end;

-- Wilson's interval of a share p at n_eff·(z/t_ν)², so that Wilson's interval with z widens
-- as t_ν would (no adjustment when ν is null); exactly 0 and 1 at its own end.
create or replace macro share_n_adjusted(n_eff, df, level, z) as n_eff * case
    when df is null then 1
    else (z / t_quantile((1 + level) / 2, greatest(df, 1))) ^ 2
end;

create or replace macro share_low(p, n_eff, df, level, z) as case
    when p <= 0 then 0
    else wilson_low(p, share_n_adjusted(n_eff, df, level, z), z)
end;

create or replace macro share_high(p, n_eff, df, level, z) as case
    when p >= 1 then 1
    else wilson_high(p, share_n_adjusted(n_eff, df, level, z), z)
end;

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

-- the two-way mean squares of the success indicators (s) and of the accuracies (y), each
-- a struct of two_way_mean_squares' row (macros.sql)
cell_squares as (
    select
        s.key,
        s,
        y
    from two_way_mean_squares(success_cells) as s
    inner join two_way_mean_squares(accuracy_cells) as y using (key)
),

-- the effective number of cells and its degrees of freedom (see the header)
effective as (
    select
        key,
        s.m as p,
        s.n_cells,
        case
            when not s.crossed then 'independent cells (Wilson)'
            when s.m > 0 and s.m < 1 then 'crossed seeds (Wilson, effective n)'
            else 'crossed seeds, none or all succeed (Wilson, effective n of the accuracies)'
        end as method,
        share_n_eff(s, y) as n_eff,
        share_df(s, y) as df,
        s.a,
        s.b
    from cell_squares
),

final as (
    select
        effective.key,
        effective.p,
        effective.n_cells,
        effective.method,
        share_n_adjusted(effective.n_eff, effective.df, params.level, params.z) as n_eff,
        share_low(effective.p, effective.n_eff, effective.df, params.level, params.z) as low,
        share_high(effective.p, effective.n_eff, effective.df, params.level, params.z) as high,
        success_coverage(effective.method, effective.a, effective.b) as coverage
    from effective
    cross join params
)

select * from final;
