-- reads: checked_level, compare_coverage, comparison_extras, comparison_parts, finished_eval, group_pairs, groups, length_list, mover_high, mover_low, rounding_tie, seed_df, seed_mean_interval, seed_variance, share_df, share_high, share_low, share_n_eff, success_difference_p, t_difference_high, t_difference_low, t_difference_p, t_quantile, tied_difference_p, two_way_mean_squares, welch_df
-- one row per: pair of groups × test length
-- parameters: `groups` (pairs differing in one setting), `digits` (every length), `threshold` (0.9), `level` (0.95)
-- Does A beat B beyond seed luck? For pairs of configuration groups (a, b) and each
-- test length both measured: the differences of mean accuracy and of success rate, each
-- with an interval over seeds and a p-value (Holm-corrected over every row), P(a > b),
-- and a verdict in words. Pairs: by default those whose configs differ in one setting
-- (differs_in; group_pairs.sql); with `groups`, every pair among those ids. A seed
-- pair's cell holds its accuracy at the final evaluation (finished trials; the mean of
-- its trials when the configuration ran in two studies).
--
-- The unit is the seed: seed pairs sharing a weight (or data) seed share its luck.
-- design 'paired': both groups measured the same seed pairs (at least 2), and
-- d_wd = y^a − y^b = Δ + α_w + β_d + ε_wd; 'partly paired', 'unpaired': each its own.
--   accuracy_diff_low, _high, accuracy_df, accuracy_p
--       paired: d̄ ± t_ν·√V, V and ν variance.sql's crossed variance of a mean (a
--       component at 0 dropped; one seed kind or holes: s²/n on n − 1); otherwise
--       V = V_a + V_b on Welch–Satterthwaite's ν; p the two-sided t test. Differences
--       that all tie (V = 0): MOVER of the groups' own intervals, the score test at the
--       largest variance (accuracy_method)
--   success_diff_low, _high, success_p
--       Newcombe's interval (MOVER) of success.sql's two intervals (Wilson at the
--       effective number of seed pairs), φ the shared successes' correlation (paired,
--       at least 5 pairs; else 0); success_p the level at which it reaches 0
--   p_improvement, _low, _high
--       paired: the share of seed pairs where a scores above b (ties ½), success.sql's
--       interval; otherwise P(a > b) over runs sharing no seed, its variance from each
--       group's placement values (DeLong's projection over crossed seeds)
--   accuracy_p_holm, success_p_holm: Holm's step-down adjustment (holm_comparisons rows);
--   verdict: beyond seed luck (Holm), too few seeds to decide (0.1 either way fits), or
--   no difference shown; coverage, warning: measured at the nearest design (below 0.93)
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`):
--     groups     default: pairs differing in one setting; e.g. '3f2a9c1b04de,77aa01c3e9f0'
--     digits     default every length both groups measured; e.g. '8,10'
--     threshold  default 0.9   success when accuracy >= threshold
--     level      default 0.95  coverage of the intervals, 0 < level < 1

with

params as (
    select
        coalesce(cast(getvariable('threshold') as double), 0.9) as threshold,
        string_split(
            replace(trim(cast(getvariable('groups') as varchar), '[]'), ' ', ''), ','
        ) as groups,
        length_list(getvariable('digits')) as digits,
        given.level,
        t_quantile((1 + given.level) / 2, 'inf'::double) as z
    from (select checked_level(getvariable('level'), 0.001, 0.999) as level) as given
),

cells as (
    select
        finished_eval.group_id,
        finished_eval.weight_seed,
        finished_eval.data_seed,
        finished_eval.digits,
        -- added smallest first: the same trials give the same bits in any row order
        list_avg(list(finished_eval.accuracy order by finished_eval.accuracy)) as accuracy
    from finished_eval
    cross join params
    where finished_eval.accuracy is not null
        and coalesce(list_contains(params.digits, finished_eval.digits), true)
    group by finished_eval.group_id, finished_eval.weight_seed, finished_eval.data_seed, finished_eval.digits
),

selected_pairs as (
    select group_pairs.*
    from group_pairs(groups) as group_pairs
    cross join params
    where case
        when params.groups is null then len(group_pairs.differs_in) = 1
        else list_contains(params.groups, group_pairs.group_a)
            and list_contains(params.groups, group_pairs.group_b)
    end
),

-- each comparison's grids (compare_grids.sql) and every part's mean squares as a struct
parts as (
    select *
    from comparison_parts(selected_pairs, cells, (select threshold from params))
),

grid_parts as (
    select key, weight_seed, data_seed, y from parts
),

group_parts as (
    select key, weight_seed, data_seed, y from parts where key.part in ('a', 'b')
),

squares as (
    select
        key.group_a,
        key.group_b,
        key.digits,
        key.design,
        {'m': m, 'a': a, 'b': b, 'n_cells': n_cells, 'crossed': crossed, 'ms_weight': ms_weight,
         'ms_data': ms_data, 'ms_residual': ms_residual, 'ms_cells': ms_cells} as sq,
        key.part
    from two_way_mean_squares(grid_parts)
),

-- the groups' own intervals of their means (variance.sql's), for differences that tie
group_intervals as (
    select key.group_a, key.group_b, key.digits, key.part, mean_low, mean_high
    from seed_mean_interval(group_parts, (select level from params))
),

comparisons as (
    select
        squares.group_a,
        squares.group_b,
        squares.digits,
        any_value(squares.design) as design,
        any_value(squares.sq) filter (where squares.part = 'a') as a,
        any_value(squares.sq) filter (where squares.part = 'b') as b,
        any_value(squares.sq) filter (where squares.part = 'difference') as d,
        any_value(squares.sq) filter (where squares.part = 'success a') as s_a,
        any_value(squares.sq) filter (where squares.part = 'success b') as s_b,
        any_value(squares.sq) filter (where squares.part = 'wins') as wins,
        any_value(squares.sq) filter (where squares.part = 'place a') as place_a,
        any_value(squares.sq) filter (where squares.part = 'place b') as place_b,
        any_value(group_intervals.mean_low) filter (where group_intervals.part = 'a') as low_a,
        any_value(group_intervals.mean_high) filter (where group_intervals.part = 'a') as high_a,
        any_value(group_intervals.mean_low) filter (where group_intervals.part = 'b') as low_b,
        any_value(group_intervals.mean_high) filter (where group_intervals.part = 'b') as high_b
    from squares
    left join group_intervals using (group_a, group_b, digits, part)
    group by squares.group_a, squares.group_b, squares.digits
),

extras as (
    select * from comparison_extras(parts)
),

-- V and ν of the accuracy difference, each share's effective n and ν
variances as (
    select
        comparisons.*,
        extras.phi,
        extras.apart_wins,
        comparisons.a.m - comparisons.b.m as accuracy_diff,
        case when comparisons.design = 'paired' then seed_variance(comparisons.d)
            else seed_variance(comparisons.a) + seed_variance(comparisons.b) end as v,
        case when comparisons.design = 'paired' then seed_df(comparisons.d)
            else welch_df(seed_variance(comparisons.a), seed_df(comparisons.a),
                seed_variance(comparisons.b), seed_df(comparisons.b)) end as df,
        share_n_eff(comparisons.s_a, comparisons.a) as n_eff_a,
        share_df(comparisons.s_a, comparisons.a) as df_a,
        share_n_eff(comparisons.s_b, comparisons.b) as n_eff_b,
        share_df(comparisons.s_b, comparisons.b) as df_b,
        seed_variance(comparisons.place_a) + seed_variance(comparisons.place_b) as v_place,
        welch_df(seed_variance(comparisons.place_a), seed_df(comparisons.place_a),
            seed_variance(comparisons.place_b), seed_df(comparisons.place_b)) as df_place
    from comparisons
    left join extras using (group_a, group_b, digits)
),

intervals as (
    select
        variances.*,
        -- two seeds of one kind can show nothing beyond seed luck (an exact test of 0 of 2
        -- against 2 of 2 gives p = 1/3): a group needs 3 seeds or a crossed 2 x 2 grid
        (variances.a.crossed or variances.a.n_cells >= 3)
            and (variances.b.crossed or variances.b.n_cells >= 3) as enough,
        case
            when not enough then null
            when not rounding_tie(variances.v) then 'seeds: t over the crossed variance of the difference'
            else 'every difference ties: MOVER of each group''s interval'
        end as accuracy_method,
        case when not enough then null when not rounding_tie(variances.v)
            then t_difference_low(variances.accuracy_diff, variances.v, variances.df, params.level)
            else mover_low(variances.a.m, variances.low_a, variances.high_a, variances.b.m,
                variances.low_b, variances.high_b, 0) end as accuracy_diff_low,
        case when not enough then null when not rounding_tie(variances.v)
            then t_difference_high(variances.accuracy_diff, variances.v, variances.df, params.level)
            else mover_high(variances.a.m, variances.low_a, variances.high_a, variances.b.m,
                variances.low_b, variances.high_b, 0) end as accuracy_diff_high,
        case when not enough then null when not rounding_tie(variances.v)
            then t_difference_p(variances.accuracy_diff, variances.v, variances.df)
            else tied_difference_p(variances.a.m, variances.b.m, variances.a.n_cells, variances.b.n_cells)
        end as accuracy_p,
        share_low(variances.s_a.m, variances.n_eff_a, variances.df_a, params.level, params.z) as success_low_a,
        share_high(variances.s_a.m, variances.n_eff_a, variances.df_a, params.level, params.z) as success_high_a,
        share_low(variances.s_b.m, variances.n_eff_b, variances.df_b, params.level, params.z) as success_low_b,
        share_high(variances.s_b.m, variances.n_eff_b, variances.df_b, params.level, params.z) as success_high_b,
        coalesce(variances.phi, 0) as success_phi,
        case when variances.design = 'paired' then variances.wins.m else variances.apart_wins end
            as p_improvement,
        case when variances.design = 'paired' then share_n_eff(variances.wins, variances.d)
            when variances.v_place > 0 then least(variances.apart_wins * (1 - variances.apart_wins)
                / variances.v_place, variances.a.n_cells, variances.b.n_cells)
            else least(variances.a.n_cells, variances.b.n_cells) end as n_eff_improvement,
        case when variances.design = 'paired' then share_df(variances.wins, variances.d)
            when variances.v_place > 0 then variances.df_place end as df_improvement
    from variances
    cross join params
),

tested as (
    select
        intervals.*,
        intervals.s_a.m - intervals.s_b.m as success_diff,
        case when enough then mover_low(intervals.s_a.m, intervals.success_low_a, intervals.success_high_a,
            intervals.s_b.m, intervals.success_low_b, intervals.success_high_b, intervals.success_phi)
        end as success_diff_low,
        case when enough then mover_high(intervals.s_a.m, intervals.success_low_a, intervals.success_high_a,
            intervals.s_b.m, intervals.success_low_b, intervals.success_high_b, intervals.success_phi)
        end as success_diff_high,
        case when enough then success_difference_p(intervals.s_a.m, intervals.n_eff_a, intervals.df_a,
            intervals.s_b.m, intervals.n_eff_b, intervals.df_b, intervals.success_phi) end as success_p,
        case when enough and intervals.p_improvement is not null then share_low(intervals.p_improvement, intervals.n_eff_improvement,
            intervals.df_improvement, params.level, params.z) end as p_improvement_low,
        case when enough and intervals.p_improvement is not null then share_high(intervals.p_improvement, intervals.n_eff_improvement,
            intervals.df_improvement, params.level, params.z) end as p_improvement_high
    from intervals
    cross join params
),

-- Holm: the j-th smallest of m p-values becomes (m − j + 1)·p_(j), running maximum, cap 1
holm_ranks as (
    select
        *,
        count(accuracy_p) over () as m_accuracy,
        row_number() over (order by accuracy_p, group_a, group_b, digits) as j_accuracy,
        count(success_p) over () as m_success,
        row_number() over (order by success_p, group_a, group_b, digits) as j_success
    from tested
),

holm as (
    select
        *,
        m_accuracy as holm_comparisons,
        case when accuracy_p is not null then least(1, max((m_accuracy - j_accuracy + 1) * accuracy_p)
            over (order by j_accuracy rows between unbounded preceding and current row)) end as accuracy_p_holm,
        case when success_p is not null then least(1, max((m_success - j_success + 1) * success_p)
            over (order by j_success rows between unbounded preceding and current row)) end as success_p_holm
    from holm_ranks
),

final as (
    select
        holm.group_a,
        selected_pairs.label_a,
        holm.group_b,
        selected_pairs.label_b,
        selected_pairs.differs_in,
        holm.digits,
        holm.design,
        holm.a.n_cells as n_a,
        holm.b.n_cells as n_b,
        holm.a.m as mean_a,
        holm.b.m as mean_b,
        holm.accuracy_diff,
        holm.accuracy_diff_low,
        holm.accuracy_diff_high,
        holm.df as accuracy_df,
        holm.accuracy_p,
        holm.accuracy_p_holm,
        holm.accuracy_method,
        holm.s_a.m as success_a,
        holm.s_b.m as success_b,
        holm.success_diff,
        holm.success_diff_low,
        holm.success_diff_high,
        holm.success_p,
        holm.success_p_holm,
        holm.p_improvement,
        holm.p_improvement_low,
        holm.p_improvement_high,
        case
            when not holm.enough then 'too few seeds to compare: a group has fewer than 3 seeds (or a crossed 2 x 2)'
            when holm.accuracy_p_holm < 1 - params.level and holm.accuracy_diff > 0
                then 'a above b beyond seed luck'
            when holm.accuracy_p_holm < 1 - params.level then 'b above a beyond seed luck'
            when holm.accuracy_diff_low < -0.1 and holm.accuracy_diff_high > 0.1
                then 'too few seeds to decide: a difference of 0.1 either way fits'
            else 'no difference shown'
        end as verdict,
        measured.coverage,
        case when measured.coverage like '%below 0.93%'
            then 'intervals at this design covered less than 0.93 in simulation' end as warning,
        holm.holm_comparisons,
        params.threshold,
        params.level
    from holm
    inner join selected_pairs using (group_a, group_b)
    cross join params
    cross join lateral (
        select compare_coverage(holm.a.crossed and holm.b.crossed, holm.design, least(holm.a.a, holm.b.a),
            least(holm.a.b, holm.b.b), least(holm.a.m, holm.b.m), greatest(holm.a.m, holm.b.m)) as coverage
    ) as measured
)

select *
from final
order by label_a, label_b, group_a, group_b, digits
