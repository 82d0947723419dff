-- reads: chi2_quantile, f_quantile, t_quantile, wilson_centre, wilson_half
-- Macros shared by the analysis files. lg-study query and the report define them on
-- every connection (analysis.query.prepare_connection), after registering
-- chi2_quantile and f_quantile (analysis/quantiles.py, from scipy): DuckDB binds a
-- macro's functions when it creates it, so this file, unlike the staging files, does not load in
-- the bare DuckDB client.
--
-- mls_low / mls_high: the modified large-sample interval at `level` of a variance
-- component written as (s1 − s2)/c, s1 and s2 independent mean squares with n1 and n2
-- degrees of freedom (Ting, Burdick, Graybill, Jeyaratnam & Lu 1990; Burdick &
-- Graybill, "Confidence Intervals on Variance Components", 1992, §3.2). With
-- α = (1 − level)/2, G_i = 1 − n_i/χ²_{1−α}(n_i), H_i = n_i/χ²_α(n_i) − 1 and
-- F_hi, F_lo the 1 − α and α quantiles of F(n1, n2):
--     low  = (s1 − s2 − √(G1² s1² + H2² s2² + ((F_hi − 1)² − G1² F_hi² − H2²)/F_hi · s1 s2)) / c
--     high = (s1 − s2 + √(H1² s1² + G2² s2² + ((1 − F_lo)² − H1² F_lo² − G2²)/F_lo · s1 s2)) / c
-- each at least 0 (a high of 0 or below: see mls_high). With s2 = 0 it is the exact
-- chi-square interval of s1/c. Coverage:
-- tests/test_replicates.py, tests/test_component_intervals.py, docs/analysis.md.

create or replace macro mls_g(n, level) as 1 - n / chi2_quantile((1 + level) / 2, n);

create or replace macro mls_h(n, level) as n / chi2_quantile((1 - level) / 2, n) - 1;

create or replace macro mls_low(s1, n1, s2, n2, c, level) as greatest(0, (
    s1 - s2 - sqrt(greatest(0,
        mls_g(n1, level) ^ 2 * s1 ^ 2 + mls_h(n2, level) ^ 2 * s2 ^ 2
        + ((f_quantile((1 + level) / 2, n1, n2) - 1) ^ 2
            - mls_g(n1, level) ^ 2 * f_quantile((1 + level) / 2, n1, n2) ^ 2
            - mls_h(n2, level) ^ 2) / f_quantile((1 + level) / 2, n1, n2) * s1 * s2
    ))
) / c);

-- the bound above before it is cut at 0: 0 exactly where s1/s2 is F_lo
create or replace macro mls_upper(s1, n1, s2, n2, c, level) as (
    s1 - s2 + sqrt(greatest(0,
        mls_h(n1, level) ^ 2 * s1 ^ 2 + mls_g(n2, level) ^ 2 * s2 ^ 2
        + ((1 - f_quantile((1 - level) / 2, n1, n2)) ^ 2
            - mls_h(n1, level) ^ 2 * f_quantile((1 - level) / 2, n1, n2) ^ 2
            - mls_g(n2, level) ^ 2) / f_quantile((1 - level) / 2, n1, n2) * s1 * s2
    ))
) / c;

-- Where s1/s2 <= F_lo no σ² >= 0 fits the mean squares at `level` and the bound falls
-- to 0 or below: cut there it would print [0, 0], a certainty no data give. It is
-- then the bound of an estimate at 0 (s1 = s2), the boundary REML puts it on.
create or replace macro mls_high(s1, n1, s2, n2, c, level) as greatest(0, case
    when mls_upper(s1, n1, s2, n2, c, level) > 0 then mls_upper(s1, n1, s2, n2, c, level)
    else mls_upper(s2, n1, s2, n2, c, level)
end);

-- Upper bounds of a variance of accuracies, which lie in [0, 1]: no variance of such a
-- number exceeds p(1 − p) <= 1/4, so a bound above 0.25 says no more than 0.25.
create or replace macro accuracy_variance_high(high) as least(high, 0.25);

-- Bounds where trials tie, which no interval from mean squares can give (all are 0):
-- k = min(a, b) cells that share no seed are independent draws. tied_noise_high: every
-- cell's replicates tie. If a cell's replicates differ with probability p, the noise
-- variance E (y1 − y2)²/2 is at most p/2, and k cells all tie with probability
-- (1 − p)^k, below (1 − level)/2 unless p <= 1 − ((1 − level)/2)^(1/k).
-- tied_trials_high: every trial ties. With q the largest probability of one accuracy,
-- Var y <= 1 − q and k trials all tie with probability at most q^(k − 1). Each is then
-- capped by accuracy_variance_high (0.25 at a laptop's 3 x 5 seeds: they cannot tell).

create or replace macro tied_noise_high(k, level) as (1 - ((1 - level) / 2) ^ (1 / k)) / 2;

create or replace macro tied_trials_high(k, level) as 1 - ((1 - level) / 2) ^ (1 / (k - 1));

-- replicates.sql's upper bound of a component (s1 − s2)/c: where all its mean squares
-- (summed: all_ms) are 0 every trial ties, where the noise's is 0 every replicate does
-- (k = min(a, b)); else the modified large-sample bound; at most 0.25.
create or replace macro replicate_high(component, s1, n1, s2, n2, c, all_ms, k, level) as
    accuracy_variance_high(case
        when all_ms = 0 then tied_trials_high(k, level)
        when component = 'numerical noise' and s1 = 0 then tied_noise_high(k, level)
        else mls_high(s1, n1, s2, n2, c, level)
    end);

-- The variance of the grand mean of a crossed a x b grid of cells (random weight and data
-- seeds), σ²_w/a + σ²_d/b + σ²_e/(ab), and its degrees of freedom (variance.sql,
-- cascade.sql, success.sql). Its unbiased estimate (MS_w + MS_d − MS_e)/(ab) carries
-- −MS_e: when one seed kind's mean square is below MS_e (its component's estimate is
-- not positive), Satterthwaite's degrees of freedom for that sum collapse toward 0 and
-- the interval spans [0, 1]. Instead, with P the larger of MS_w and MS_d (k_P its
-- degrees of freedom) and Q the other (k_Q):
--     V = (max(P, MS_e) + max(Q − MS_e, 0)) / (ab)
--     ν = (max(P, MS_e) + max(Q − MS_e, 0))² / (max(P, MS_e)²/k_P + max(Q − MS_e, 0)²/k_Q)
-- Both components positive, V is the unbiased estimate; one at 0 (its REML estimate on
-- the boundary) is dropped and its mean square pooled into the residual, which leaves
-- the one-way model of the other seed kind: V = P/(ab), the variance of the mean of its
-- seed means, on k_P degrees of freedom. Neither positive: V = MS_e/(ab) on
-- min(a, b) − 1 degrees of freedom, as the grid cannot say which seed kind varies.
-- The same in numpy: analysis/mean_interval.py; why, and the coverage: docs/analysis.md.

create or replace macro crossed_mean_variance(ms_w, ms_d, ms_e, a, b) as
    (greatest(ms_w, ms_d, ms_e) + greatest(least(ms_w, ms_d) - ms_e, 0)) / (a * b);

-- Mean squares that are equal in exact arithmetic (success indicators often tie) differ
-- in their last bits by the order of the sums: ν compares them with a relative
-- tolerance of 1e-9, so that ties go to the same case (neither positive; the weight
-- seed's side) in SQL and numpy, whatever the rounding.

create or replace macro crossed_mean_df(ms_w, ms_d, ms_e, a, b) as case
    when greatest(ms_w, ms_d) <= ms_e * (1 + 1e-9) then least(a, b) - 1
    else (greatest(ms_w, ms_d) + greatest(least(ms_w, ms_d) - ms_e, 0)) ^ 2 / (
        greatest(ms_w, ms_d) ^ 2 / (case when ms_w >= ms_d * (1 - 1e-9) then a - 1 else b - 1 end)
        + greatest(least(ms_w, ms_d) - ms_e, 0) ^ 2 / (case when ms_w >= ms_d * (1 - 1e-9) then b - 1 else a - 1 end))
end;

-- The variance of a grid's mean over seeds and its degrees of freedom: a complete
-- crossed grid, the two-way random-effects variance with a component at 0 dropped
-- (the mean's, above); otherwise the cells as independent, s²/n on n − 1.

create or replace macro seed_variance(sq) as case
    when sq.crossed then crossed_mean_variance(sq.ms_weight, sq.ms_data, sq.ms_residual, sq.a, sq.b)
    else sq.ms_cells / sq.n_cells
end;

create or replace macro seed_df(sq) as case
    when sq.crossed then crossed_mean_df(sq.ms_weight, sq.ms_data, sq.ms_residual, sq.a, sq.b)
    else sq.n_cells - 1
end;

-- Wilson's score interval of a proportion p out of n (n may be an effective number, not
-- an integer), z = Φ⁻¹((1 + level)/2): (p + z²/2n ± z·√(p(1 − p)/n + z²/4n²)) / (1 + z²/n),
-- within [0, 1] (success.sql).

create or replace macro wilson_low(p, n, z) as greatest(0,
    (p + z ^ 2 / (2 * n) - z * sqrt(p * (1 - p) / n + z ^ 2 / (4 * n ^ 2))) / (1 + z ^ 2 / n));

create or replace macro wilson_high(p, n, z) as least(1,
    (p + z ^ 2 / (2 * n) + z * sqrt(p * (1 - p) / n + z ^ 2 / (4 * n ^ 2))) / (1 + z ^ 2 / n));

-- An aggregate: Σ (x − m)² over a group's cells, added in the order of their seeds, over
-- k degrees of freedom (at least 1): a two-way layout's mean square when x and m are
-- the cell's row, column or residual term and the grand mean.

create or replace macro mean_square(x, m, weight_seed, data_seed, k) as
    list_sum(list((x - m) ^ 2 order by weight_seed, data_seed)) / greatest(k, 1);

-- The coverage of the 95 % intervals of the variance components and shares
-- (lucky_tickets.sql, replicates.sql), of the mean (variance.sql) and of the success
-- probability (success.sql), measured by simulation at the design nearest
-- to a x b seeds (tests/test_component_intervals.py and, near the bound,
-- tests/test_share_intervals.py; tests/test_replicates.py, tests/test_mean_interval.py,
-- tests/test_success_interval.py; the
-- table in docs/analysis.md): printed beside each interval.

create or replace macro share_coverage(a, b, grand_mean) as case
    when a is null then null
    when a < 8 or b < 8 then 'measured 0.95-0.97 at 3 x 5 seeds'
    when grand_mean > 0.8 or grand_mean < 0.2
        then 'measured 0.92-0.95 at 8 x 8 and 24 x 20 seeds near accuracy 1'
    else 'measured 0.94-0.96 at 8 x 8 and 24 x 20 seeds'
end;

create or replace macro component_coverage(a, b, grand_mean) as case
    when a is null then null
    when grand_mean between 0.2 and 0.8 then 'measured 0.94-0.96 at 3 x 5, 8 x 8 and 24 x 20 seeds'
    when a < 8 or b < 8 then 'measured 0.91-0.93 at 3 x 5 seeds near accuracy 1'
    when a < 24 or b < 20 then 'measured 0.88-0.92 at 8 x 8 seeds near accuracy 1'
    else 'measured 0.91-0.94 at 24 x 20 seeds near accuracy 1, 0.76-0.79 for sigma2_residual'
end;

create or replace macro replicate_coverage(component, a, b, grand_mean) as case
    when grand_mean between 0.2 and 0.8 then 'measured 0.94-0.97 at 3 x 5 x 2, 8 x 8 x 2 and 24 x 20 x 2 seeds'
    when component = 'numerical noise' then case
        when a < 8 or b < 8 then 'measured 0.81 at 3 x 5 x 2 seeds near accuracy 1'
        when a < 24 or b < 20 then 'measured 0.78 at 8 x 8 x 2 seeds near accuracy 1'
        else 'measured 0.67 at 24 x 20 x 2 seeds near accuracy 1'
    end
    when a < 8 or b < 8 then 'measured 0.92-0.95 at 3 x 5 x 2 seeds near accuracy 1'
    when a < 24 or b < 20 then 'measured 0.90-0.93 at 8 x 8 x 2 seeds near accuracy 1'
    else 'measured 0.91-0.92 at 24 x 20 x 2 seeds near accuracy 1'
end;

create or replace macro mean_coverage(method, a, b, mean) as case
    when method not like 'crossed%' then 'Wilson over independent seed pairs (not simulated)'
    when mean between 0.2 and 0.8 then 'measured 0.94-0.99 at 2 x 2 to 24 x 20 seeds'
    when a < 8 or b < 8 then 'measured 0.94-0.99 at 2 x 2 to 4 x 4 seeds near accuracy 0 or 1'
    when a < 24 or b < 20 then 'measured 0.92-0.93 at 8 x 8 seeds near accuracy 0 or 1'
    else 'measured 0.935-0.95 at 24 x 20 seeds near accuracy 0 or 1'
end;

create or replace macro success_coverage(method, a, b) as case
    when method like 'independent%' then 'Wilson over independent cells'
    when a < 8 or b < 8 then 'measured 0.98-0.99 at 3 x 5 seeds: wider than 95 %'
    when a < 24 or b < 20 then 'measured 0.96-0.97 at 8 x 8 seeds'
    else 'measured 0.96-0.97 at 24 x 20 seeds'
end;

-- The two-way layout of a table of cells, as a table: for each `key` of `cells` (a table
-- or CTE of key, weight_seed, data_seed, y, one row per seed pair), the grand mean m,
-- the seeds a and b, the cells, whether they form a complete crossed grid (a, b >= 2,
-- every cell), and the mean squares of weight, data, residual (two-way without
-- replication) and of the cells as independent. Sums add in a fixed order, so the same
-- cells give the same bits in any row order (seed_mean_interval, success.sql).

create or replace macro two_way_mean_squares(cells) as table
    with cell_effects as (
        select
            *,
            list_avg(list(y order by y) over (partition by key, weight_seed)) as m_w,
            list_avg(list(y order by y) over (partition by key, data_seed)) as m_d,
            list_avg(list(y order by y) over (partition by key)) as m
        from query_table(cells)
    )

    select
        key,
        any_value(m) as m,
        count(distinct weight_seed) as a,
        count(distinct data_seed) as b,
        count(*) as n_cells,
        a >= 2 and b >= 2 and n_cells = a * b as crossed,
        mean_square(m_w, m, weight_seed, data_seed, a - 1) as ms_weight,
        mean_square(m_d, m, weight_seed, data_seed, b - 1) as ms_data,
        mean_square(y - m_w - m_d, -m, weight_seed, data_seed, (a - 1) * (b - 1)) as ms_residual,
        mean_square(y, m, weight_seed, data_seed, n_cells - 1) as ms_cells
    from cell_effects
    group by key;

-- Cells that tie in exact arithmetic leave a variance of about 1e-33 from rounding (33
-- trials at 0.985 gave a standard deviation of 3e-16 and the interval [0.985, 0.985]); a
-- spread of accuracies measured on at most a million questions gives a variance of the
-- mean above 1e-18. Below 1e-24 the cells tie.
create or replace macro rounding_tie(v) as v <= 1e-24;

-- The interval of a mean over seeds, as a table: for each `key` of `cells` (as above), the
-- grand mean m, V the variance of m and ν its degrees of freedom: a complete crossed
-- grid takes crossed_mean_variance and crossed_mean_df; otherwise the cells count as
-- independent, V = s²/n, ν = n − 1. The interval is Wilson's score interval at the
-- effective number of seed pairs n_eff = m(1 − m)/V with t_ν for z (as success.sql's):
-- the normal interval m ± t_ν·√V would have to be clipped to [0, 1], and near a bound it
-- covers too little, because the seeds that would pull the mean away from the bound are
-- the rare ones; Wilson's bounds widen away from the bound and stay inside [0, 1]. When
-- every cell ties (V = 0: every seed scores 0, or every seed 1) the cells show no spread
-- to estimate V from, and [m, m] would claim seeds never differ: the interval is then
-- Wilson's over the n cells with z, the variance of a mean of n independent values in
-- [0, 1] at its largest, m(1 − m)/n (at m = 0: [0, z²/(n + z²)]), as success.sql
-- counts tied cells. Keys with one cell get no row. Coverage:
-- tests/test_mean_interval.py (variance.sql), printed as mean_coverage. After the macros
-- it calls: DuckDB binds them when it creates this one.

create or replace macro seed_mean_interval(cells, level) as table
    select
        cell_squares.key,
        case
            when rounding_tie(interval.v) then 'every seed pair ties (Wilson over the seed pairs)'
            when cell_squares.crossed then 'crossed seeds (two-way, a component at 0 dropped; Wilson at effective n)'
            else 'independent cells (Wilson at effective n over seed pairs)'
        end as mean_method,
        interval.df as mean_df,
        mean_coverage(
            case when cell_squares.crossed then 'crossed' else 'independent' end,
            cell_squares.a, cell_squares.b, cell_squares.m
        ) as mean_coverage,
        case
            when rounding_tie(interval.v) and cell_squares.m <= 0 then 0
            when rounding_tie(interval.v) then wilson_low(cell_squares.m, cell_squares.n_cells, interval.z)
            when cell_squares.m <= 0 or cell_squares.m >= 1 then greatest(0, cell_squares.m - interval.t * sqrt(interval.v))
            else greatest(0, wilson_centre(cell_squares.m, interval.n_eff, interval.t)
                - wilson_half(cell_squares.m, interval.n_eff, interval.t))
        end as mean_low,
        case
            when rounding_tie(interval.v) and cell_squares.m >= 1 then 1
            when rounding_tie(interval.v) then wilson_high(cell_squares.m, cell_squares.n_cells, interval.z)
            when cell_squares.m <= 0 or cell_squares.m >= 1 then least(1, cell_squares.m + interval.t * sqrt(interval.v))
            else least(1, wilson_centre(cell_squares.m, interval.n_eff, interval.t)
                + wilson_half(cell_squares.m, interval.n_eff, interval.t))
        end as mean_high
    from two_way_mean_squares(cells) as cell_squares
    cross join lateral (
        select
            case
                when cell_squares.crossed then crossed_mean_df(
                    cell_squares.ms_weight, cell_squares.ms_data, cell_squares.ms_residual,
                    cell_squares.a, cell_squares.b)
                else cell_squares.n_cells - 1
            end as df,
            case
                when cell_squares.crossed then crossed_mean_variance(
                    cell_squares.ms_weight, cell_squares.ms_data, cell_squares.ms_residual,
                    cell_squares.a, cell_squares.b)
                else cell_squares.ms_cells / cell_squares.n_cells
            end as v,
            t_quantile((1 + level) / 2, greatest(coalesce(df, 1), 1)) as t,
            t_quantile((1 + level) / 2, 'inf'::double) as z,
            cell_squares.m * (1 - cell_squares.m) / nullif(v, 0) as n_eff
    ) as interval
    where cell_squares.n_cells >= 2;
