-- reads: t_cdf, t_quantile
-- The parts of compare.sql's intervals, as scalar macros over the two-way mean squares
-- of a grid of cells (two_way_mean_squares' row as a struct `sq`: m, a, b, n_cells,
-- crossed, ms_weight, ms_data, ms_residual, ms_cells), defined on every connection
-- (analysis.query.prepare_connection); a grid's variance of its mean (seed_variance,
-- seed_df) is macros.sql's and a share's effective n and interval (share_n_eff,
-- share_low, share_high) success_interval.sql's. The same
-- formulas in numpy:
-- analysis/compare_interval.py (tests/test_compare.py checks the two against each other);
-- why these, and their coverage measured by simulation: docs/analysis.md.

-- Welch–Satterthwaite's degrees of freedom of V_a + V_b (a part at 0 adds none)
create or replace macro welch_df(v_a, df_a, v_b, df_b) as (v_a + v_b) ^ 2 / nullif(
    case when v_a > 0 then v_a ^ 2 / df_a else 0 end + case when v_b > 0 then v_b ^ 2 / df_b else 0 end, 0);

-- diff ± t_ν·√V within [−1, 1], and the two-sided p of the t test of no difference
create or replace macro t_difference_low(diff, v, df, level) as
    greatest(-1, diff - t_quantile((1 + level) / 2, greatest(coalesce(df, 1), 1)) * sqrt(v));

create or replace macro t_difference_high(diff, v, df, level) as
    least(1, diff + t_quantile((1 + level) / 2, greatest(coalesce(df, 1), 1)) * sqrt(v));

create or replace macro t_difference_p(diff, v, df) as
    2 * t_cdf(-abs(diff) / sqrt(v), greatest(coalesce(df, 1), 1));

-- Newcombe's combination (MOVER, Zou & Donner 2008) of two groups' intervals into one of
-- m_a − m_b, φ the correlation of the two estimates (0 for groups on different seeds)
create or replace macro mover_low(m_a, low_a, high_a, m_b, low_b, high_b, phi) as greatest(-1,
    m_a - m_b - sqrt(greatest(0, (m_a - low_a) ^ 2 - 2 * phi * (m_a - low_a) * (high_b - m_b)
        + (high_b - m_b) ^ 2)));

create or replace macro mover_high(m_a, low_a, high_a, m_b, low_b, high_b, phi) as least(1,
    m_a - m_b + sqrt(greatest(0, (high_a - m_a) ^ 2 - 2 * phi * (high_a - m_a) * (m_b - low_b)
        + (m_b - low_b) ^ 2)));

-- Differences that all tie (V = 0) show no spread: the score test at the largest
-- variance a mean of n values in [0, 1] can have, p̄(1 − p̄)/n
create or replace macro tied_difference_p(m_a, m_b, n_a, n_b) as case
    when m_a = m_b then 1
    else 2 * t_cdf(-abs(m_a - m_b) / sqrt((m_a + m_b) / 2 * (1 - (m_a + m_b) / 2) * (1 / n_a + 1 / n_b)),
        'inf'::double)
end;

-- The coverage compare.sql's intervals had in simulation at the nearest design
-- (tests/compare_coverage.py, docs/analysis.md), printed beside each comparison; crossed
-- grids only (both groups a complete grid of at least 2 x 2 seeds).
-- Near accuracy 1 (a group's mean above 0.8, or below 0.2 by symmetry) the two cells
-- that fall below 0.93 are said and flagged with 'below 0.93'.
create or replace macro compare_coverage(crossed, design, a, b, low_mean, high_mean) as case
    when a is null or b is null then null
    when not crossed then 'not simulated: one seed kind varies, or a grid has holes (t over the cells as independent)'
    when high_mean <= 0.8 and low_mean >= 0.2 then case
        when a < 3 or b < 3 then 'measured 0.96-1.00 (accuracy), 0.95-1.00 (success) at 2 x 2 and 4 x 2 seeds'
        when a < 8 or b < 8 then 'measured 0.93-1.00 (accuracy), 0.97-1.00 (success) at 3 x 5 seeds'
        when a < 24 or b < 20 then 'measured 0.94-1.00 (accuracy), 0.95-1.00 (success) at 8 x 8 seeds'
        else 'measured 0.95-1.00 (accuracy), 0.96-1.00 (success) at 24 x 20 seeds'
    end
    when a < 3 or b < 3 then 'measured 0.98-1.00 (accuracy), 1.00 (success) at 2 x 2 and 4 x 2 seeds near accuracy 1'
    when a < 8 or b < 8 then 'measured 0.94-0.98 (accuracy), 1.00 (success) at 3 x 5 seeds near accuracy 1'
    when a < 24 or b < 20 then case
        when design = 'paired' then 'measured 0.92-0.95 (accuracy: below 0.93 when the seeds'' luck '
            || 'is shared, correlation 0.5-0.9), 1.00 (success) at 8 x 8 seeds near accuracy 1'
        else 'measured 0.95-1.00 (accuracy), 1.00 (success) at 8 x 8 seeds near accuracy 1'
    end
    else 'measured 0.94-1.00 (accuracy), 0.91-0.92 (success: below 0.93, rare failures '
        || 'clustered by seed) at 24 x 20 seeds near accuracy 1'
end;
