-- reads: accuracy_variance_high, component_coverage, mls_high, mls_low, share_coverage, share_intervals, tied_trials_high
-- How much of the variance of a configuration group's accuracy does the weight seed
-- explain, how much the data seed, how much is left (001 Fig. 11, F.9)? Table macros
-- over a crossed grid of a weight seeds x b data seeds, defined on every connection
-- (analysis.query.prepare_connection), for lucky_tickets.sql:
--
--   grid_anova(tables_table)
--       per (group_id, at_digits, replicate): the sums of squares, mean squares,
--       components and shares below of one a x b table (`cells`, a list of rows);
--       shared by the estimates (seed_components) and the bootstrap (seed_bootstrap.sql).
--   seed_components(grids_table, at_level)
--       per (group_id, at_digits) of grids_table (a, b, grand_mean and `grid`: the a x b
--       values centred on the grand mean, row-major, weight seed i and data seed j at
--       i·b + j + 1): the estimates with their intervals at `at_level`.
--
-- Variance shares: two-way ANOVA without replication, with m the grand mean, m_w and
-- m_d the row and column means:
--     SS_weight   = b · Σ_w (m_w − m)²
--     SS_data     = a · Σ_d (m_d − m)²
--     SS_residual = Σ_wd (y − m_w − m_d + m)²   (weight × data interaction + noise)
--     SS_total    = Σ_wd (y − m)²  = SS_weight + SS_data + SS_residual
-- ss_share_* = SS_* / SS_total: the fixed-effects shares of these seeds (null when
-- every trial scored the same, i.e. SS_total < 1e-20). With few seeds they are biased
-- upward: a weight seed that does nothing still gets SS_weight ≈ (a − 1)·σ²_residual.
--
-- Variance components (random effects: the seeds are draws from all seeds), by the
-- method of moments for the two-way layout without replication. With the mean squares
-- MS_weight = SS_weight/(a − 1), MS_data = SS_data/(b − 1),
-- MS_residual = SS_residual/((a − 1)(b − 1)), whose expectations are σ²_res + b·σ²_w,
-- σ²_res + a·σ²_d and σ²_res:
--     sigma2_weight   = max(0, (MS_weight − MS_residual) / b)
--     sigma2_data     = max(0, (MS_data − MS_residual) / a)
--     sigma2_residual = MS_residual
-- sigma2_*_truncated says when the difference was negative and the component is set to
-- 0. component_share_* = sigma2_* / (sigma2_weight + sigma2_data + sigma2_residual):
--
-- Intervals of the components (sigma2_*_low, sigma2_*_high): the modified large-sample
-- interval of (MS_weight − MS_residual)/b and (MS_data − MS_residual)/a, and the exact
-- chi-square interval of MS_residual (macros mls_low and mls_high, analysis/sql/macros/macros.sql;
-- a grid whose trials all tie gets macros.sql's bound of ties; upper bounds at most 0.25;
-- coverage 0.94-0.96 measured at 3 x 5, 8 x 8 and 24 x 20 seeds, docs/analysis.md).
--
-- Intervals of the shares (component_share_*_low, _high): generalized confidence
-- intervals from the three mean squares' pivots (share_intervals, analysis/
-- share_intervals.py: Weerahandi 1993; Hamada & Weerahandi 2000), coverage measured by
-- simulation at 3 x 5, 8 x 8 and 24 x 20 seeds and printed in share_coverage
-- (docs/analysis.md).

create or replace macro grid_anova(tables_table) as table
with

replicate_sums as (
    select
        group_id,
        at_digits,
        replicate,
        a,
        b,
        [list_sum(cells_row) for cells_row in cells] as row_sums,
        [list_sum([cells_row[j + 1] for cells_row in cells]) for j in range(b)] as column_sums,
        list_sum([list_sum([y * y for y in cells_row]) for cells_row in cells]) as squares
    from query_table(tables_table)
),

-- SS_total = Σy² − T²/ab, SS_weight = Σ_w R_w²/b − T²/ab, SS_data = Σ_d C_d²/a − T²/ab
-- with T the table's sum and R_w, C_d its row and column sums (greatest and least
-- below clamp round-off only, which would otherwise put a share at 1 + 2e-16)
sums_of_squares as (
    select
        group_id,
        at_digits,
        replicate,
        a,
        b,
        squares - list_sum(row_sums) ^ 2 / (a * b) as ss_total,
        greatest(
            list_sum([r * r for r in row_sums]) / b - list_sum(row_sums) ^ 2 / (a * b), 0
        ) as ss_weight,
        greatest(
            list_sum([c * c for c in column_sums]) / a - list_sum(row_sums) ^ 2 / (a * b), 0
        ) as ss_data
    from replicate_sums
),

mean_squares as (
    select
        *,
        greatest(ss_total - ss_weight - ss_data, 0) as ss_residual,
        ss_total >= 1e-20 as varies,
        ss_weight / (a - 1) as ms_weight,
        ss_data / (b - 1) as ms_data,
        greatest(ss_total - ss_weight - ss_data, 0) / ((a - 1) * (b - 1)) as ms_residual
    from sums_of_squares
),

components as (
    select
        *,
        greatest((ms_weight - ms_residual) / b, 0) as sigma2_weight,
        greatest((ms_data - ms_residual) / a, 0) as sigma2_data,
        ms_residual as sigma2_residual,
        ms_weight < ms_residual as sigma2_weight_truncated,
        ms_data < ms_residual as sigma2_data_truncated
    from mean_squares
),

final as (
    select
        *,
        case when varies then least(ss_weight / ss_total, 1) end as ss_share_weight,
        case when varies then least(ss_data / ss_total, 1) end as ss_share_data,
        case when varies then least(ss_residual / ss_total, 1) end as ss_share_residual,
        case when varies then least(sigma2_weight / sigma2_sum, 1) end as component_share_weight,
        case when varies then least(sigma2_data / sigma2_sum, 1) end as component_share_data,
        case when varies then least(sigma2_residual / sigma2_sum, 1) end as component_share_residual
    from components
    cross join lateral (
        select components.sigma2_weight + components.sigma2_data + components.sigma2_residual
            as sigma2_sum
    ) as total
)

select *
from final;

create or replace macro seed_components(grids_table, at_level) as table
with

grids as (
    select *
    from query_table(grids_table)
),

-- the grid as a table: every seed once, in order
tables as (
    select
        group_id,
        at_digits,
        0 as replicate,
        a,
        b,
        [[grid[1 + i * b + j] for j in range(b)] for i in range(a)] as cells
    from grids
),

final as (
    select
        grids.group_id,
        grids.at_digits,
        estimates.* exclude (group_id, at_digits, replicate, a, b),
        mls_low(estimates.ms_weight, grids.a - 1, estimates.ms_residual, (grids.a - 1) * (grids.b - 1),
            grids.b, at_level) as sigma2_weight_low,
        accuracy_variance_high(case
            when tied then tied_trials_high(least(grids.a, grids.b), at_level)
            else mls_high(estimates.ms_weight, grids.a - 1, estimates.ms_residual, (grids.a - 1) * (grids.b - 1),
                grids.b, at_level)
        end) as sigma2_weight_high,
        mls_low(estimates.ms_data, grids.b - 1, estimates.ms_residual, (grids.a - 1) * (grids.b - 1),
            grids.a, at_level) as sigma2_data_low,
        accuracy_variance_high(case
            when tied then tied_trials_high(least(grids.a, grids.b), at_level)
            else mls_high(estimates.ms_data, grids.b - 1, estimates.ms_residual, (grids.a - 1) * (grids.b - 1),
                grids.a, at_level)
        end) as sigma2_data_high,
        mls_low(estimates.ms_residual, (grids.a - 1) * (grids.b - 1), 0, 1, 1, at_level)
            as sigma2_residual_low,
        accuracy_variance_high(case
            when tied then tied_trials_high(least(grids.a, grids.b), at_level)
            else mls_high(estimates.ms_residual, (grids.a - 1) * (grids.b - 1), 0, 1, 1, at_level)
        end) as sigma2_residual_high,
        share_intervals(
            estimates.ms_weight, estimates.ms_data, estimates.ms_residual, grids.a, grids.b, at_level
        ) as share_gci,
        share_coverage(grids.a, grids.b, grids.grand_mean) as share_coverage,
        component_coverage(grids.a, grids.b, grids.grand_mean) as component_coverage
    from grids
    inner join grid_anova(tables) as estimates using (group_id, at_digits)
    -- every trial of the grid scored the same: the bounds of ties (macros.sql)
    cross join lateral (
        select estimates.ms_weight + estimates.ms_data + estimates.ms_residual = 0 as tied
    )
)

select *
from final;
