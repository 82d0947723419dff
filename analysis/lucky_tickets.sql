-- Are there lucky weight tickets (001 Fig. 11, F.9)? For every configuration group
-- whose trials cross at least 2 weight seeds with at least 2 data seeds: how much of
-- the variance of accuracy the weight seed explains, how much the data seed, how much
-- is left; and per weight seed its mean, min and max over data orders, and whether it
-- is a lucky ticket. One row per (group, weight seed); the group's numbers repeat on
-- its rows, with the same numbers per test length in `by_length` (001 F.9 shows 30,
-- 50, 70 and 100 digits apart). A group with no complete 2 x 2 subgrid gets one row
-- with weight_seed null and `skipped_reason`.
--
-- The measured value y(w, d) of a trial is its mean accuracy over the out-of-
-- distribution test lengths at its final evaluation step (or over the lengths in
-- `digits` when given; measured_kind says whether they are out of or inside the
-- training range). A trial has no y when one of those lengths has no accuracy (none
-- recorded, or NaN): an unmeasured cell. When the same configuration ran in two
-- studies, a cell holds the mean of its trials.
--
-- Coverage: the grid of a group is every weight seed x every data seed its trials
-- use, whatever their status. A cell is missing when its trial failed, is not
-- finished, diverged before its first evaluation, has no accuracy at the measured
-- lengths, or was never run (`missing_cells` says which, e.g. "w2 d3: failed"). The
-- statistics use the largest complete subgrid: the set of weight seeds x data seeds,
-- each at least 2, with every cell measured and the most cells (ties: the first seeds
-- in order; searched over the subsets of the side with fewer seeds when it has at most
-- 16). With more than 16 seeds on each side a complete grid is its own subgrid, and an
-- incomplete one drops every seed of one side that has a missing cell (the side whose
-- dropping keeps more cells; ties: weight seeds): a large complete subgrid, not always
-- the largest.
-- `left_out_seeds` names the seeds outside it; finished diverged trials count with
-- the accuracy they had reached, like everywhere in analysis/.
--
-- Variance shares: two-way ANOVA without replication over the subgrid of a weight
-- seeds x b data seeds, with m the grand mean, m_w and m_d the row and column means:
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
-- the share of the variance of one new trial's y due to each seed.
--
-- Intervals of the components (sigma2_*_low, sigma2_*_high): the modified large-sample
-- interval of (MS_weight − MS_residual)/b and (MS_data − MS_residual)/a, and the exact
-- chi-square interval of MS_residual (macros mls_low and mls_high, analysis/macros.sql;
-- coverage 0.94-0.96 measured at 3 x 5, 8 x 8 and 24 x 20 seeds, docs/analysis.md).
--
-- Intervals of the shares (component_share_*_low, _high): generalized confidence
-- intervals from the three mean squares' pivots (share_intervals, analysis/
-- share_intervals.py: Weerahandi 1993; Hamada & Weerahandi 2000), coverage measured by
-- simulation at 3 x 5, 8 x 8 and 24 x 20 seeds and printed in share_coverage
-- (docs/analysis.md).
--
-- Kept for comparison (columns *_boot_low, *_boot_high; also given for the
-- components): percentile bootstrap over both seeds at
-- once. A replicate draws a weight seeds and b data seeds of the subgrid with
-- replacement and recomputes every statistic on the a x b table of the drawn rows and
-- columns; the interval is the (1 − level)/2 and (1 + level)/2 quantiles of the
-- `resamples` replicates (linear interpolation, as quantile_cont). The draws come from
-- hash(hash(boot_seed, group, side, replicate, draw)), so the same parameters give the
-- same result; the outer hash because DuckDB combines the hashes of several arguments
-- so that their low bits only XOR (8 draws of 8 seeds came out as a fixed pattern).
-- Replicates whose table is constant have no shares and are left out of the share
-- intervals (boot_undefined counts them). The bootstrap shrinks the components and
-- does not hold its level with few seeds: its 95 % interval of the weight share covered
-- the truth in 0.88 of simulated 3 x 5 studies and 0.93 of 8 x 8 ones (docs/analysis.md).

-- Lucky ticket: a weight seed whose minimum over data orders is above `threshold`.
--
-- Rank agreement: Kendall's coefficient of concordance W of the weight seeds' ranks
-- across data orders. Each data order ranks the a weight seeds by y rounded to 9
-- decimals (equal accuracies computed in a different order differ in the last bit;
-- ties get their average rank). With R_w the sum of weight seed w's ranks over the b
-- data orders:
--     W = 12 · Σ_w (R_w − b(a + 1)/2)² / (b²(a³ − a) − b · Σ_d Σ_ties (t³ − t))
-- 1 = every data order ranks the weight seeds alike (the weight seed decides). No
-- agreement does not give 0: b independent random rankings give W ≈ 1/b on average.
-- So read W with Friedman's test: chi2 = b(a − 1)W (tie-corrected as W is), with
-- a − 1 degrees of freedom, and friedman_p = P(chi-square(a − 1) ≥ chi2), the chance
-- of that much agreement when the data orders rank the weight seeds at random (the
-- chi-square approximation; rough for b < 5). The survival function is exact for
-- even a − 1, Q = exp(−x/2) Σ_{j < k/2} (x/2)^j / j!, and for odd a − 1,
-- Q = erfc(√(x/2)) + exp(−x/2) Σ_{1 ≤ j ≤ (k−1)/2} (x/2)^(j − 1/2) / Γ(j + 1/2), with
-- erfc from its Chebyshev fit (relative error < 1.2e-7, Numerical Recipes §6.2).
-- W, chi2 and p are null when every data order ties all weight seeds.
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`, or
-- `SET VARIABLE name = value` in the DuckDB client):
--     threshold  default 0.9   lucky when min over data orders > threshold
--     digits     default all out-of-distribution lengths; e.g. '50,100'
--     resamples  default 1000  bootstrap replicates per group
--     boot_seed  default 0     seed of the bootstrap draws
--     level      default 0.95  coverage of the bootstrap intervals, 0 < level < 1

with

params as (
    select
        coalesce(cast(getvariable('threshold') as double), 0.9) as threshold,
        cast(
            string_split(replace(trim(cast(getvariable('digits') as varchar), '[]'), ' ', ''), ',')
            as bigint[]
        ) as digits,
        coalesce(cast(getvariable('resamples') as bigint), 1000) as resamples,
        coalesce(cast(getvariable('boot_seed') as bigint), 0) as boot_seed,
        case
            when coalesce(cast(getvariable('level') as double), 0.95) not between 0.001 and 0.999
                then error('level must be between 0.001 and 0.999')
            else coalesce(cast(getvariable('level') as double), 0.95)
        end as level
),

-- every trial of every group, finished or not: the seeds the group's design spans
design as (
    select
        groups.group_id,
        groups.group_label,
        groups.study,
        groups.trial_id,
        groups.weight_seed,
        groups.data_seed,
        trials.status,
        finished_trials.trial_id is not null as finished
    from groups
    inner join trials using (study, trial_id)
    left join finished_trials using (study, trial_id)
),

measured as (
    select
        design.group_id,
        eval.study,
        eval.trial_id,
        eval.digits,
        eval.in_distribution,
        eval.accuracy
    from final_eval as eval
    inner join design using (study, trial_id)
    cross join params
    where
        design.finished
        and case
            when params.digits is null then not eval.in_distribution
            else list_contains(params.digits, eval.digits)
        end
),

group_digits as (
    select
        group_id,
        list(distinct digits order by digits) as measured_digits,
        count(distinct digits) as n_digits,
        case
            when bool_and(in_distribution) then 'in-distribution'
            when not bool_or(in_distribution) then 'out-of-distribution'
            else 'mixed'
        end as measured_kind
    from measured
    group by group_id
),

-- y per trial at each measured length (at_digits) and over all of them (at_digits 0).
-- Means here and below add in a fixed order (list_avg of an ordered list): avg() adds
-- in the order rows arrive, which can change the last bit from run to run, and the
-- bootstrap must repeat exactly.
trial_values as (
    select
        group_id,
        study,
        trial_id,
        digits as at_digits,
        accuracy as y
    from measured
    union all
    select
        measured.group_id,
        measured.study,
        measured.trial_id,
        0 as at_digits,
        case
            when count(measured.accuracy) = any_value(group_digits.n_digits)
                then list_avg(list(measured.accuracy order by measured.digits))
        end as y
    from measured
    inner join group_digits using (group_id)
    group by measured.group_id, measured.study, measured.trial_id
),

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
    from design
    left join trial_values
        on trial_values.study = design.study
        and trial_values.trial_id = design.trial_id
        and trial_values.at_digits = 0
    left join evaluated
        on evaluated.study = design.study
        and evaluated.trial_id = design.trial_id
),

grid_size as (
    select
        group_id,
        count(distinct weight_seed) as grid_weight_seeds,
        count(distinct data_seed) as grid_data_seeds
    from design
    group by group_id
    having count(distinct weight_seed) >= 2 and count(distinct data_seed) >= 2
),

grid as (
    select
        weights.group_id,
        weights.weight_seed,
        data.data_seed
    from (select distinct group_id, weight_seed from design) as weights
    inner join (select distinct group_id, data_seed from design) as data using (group_id)
    inner join grid_size using (group_id)
),

grid_cells as (
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

subgrid as (
    select * from searched_subgrid
    union all
    select * from large_subgrid_kept
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
            when count(subgrid.group_id) = 0 and any_value(sides.k) > 16
                then 'no complete 2 x 2 subgrid left after dropping the seeds with missing cells '
                    || '(more than 16 seeds on each side: not searched seed set by seed set)'
            when count(subgrid.group_id) = 0
                then 'no complete 2 x 2 subgrid of measured trials'
        end as skipped_reason
    from grid_cells
    inner join grid_size using (group_id)
    inner join sides using (group_id)
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
    from (select distinct group_id, weight_seed from grid) as grid
    semi join subgrid using (group_id)
    anti join subgrid using (group_id, weight_seed)
    union all
    select
        grid.group_id,
        'data seed ' || grid.data_seed,
        1,
        grid.data_seed
    from (select distinct group_id, data_seed from grid) as grid
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

-- the cells of the subgrid: y per length and over lengths; a cell run in two studies
-- holds the mean of its trials
crossed_cells as (
    select
        design.group_id,
        design.weight_seed,
        design.data_seed,
        trial_values.at_digits,
        list_avg(list(trial_values.y order by design.study, design.trial_id)) as y,
        bool_or(design.status = 'diverged') as diverged
    from design
    inner join trial_values using (group_id, study, trial_id)
    inner join subgrid using (group_id, weight_seed, data_seed)
    where trial_values.y is not null
    group by design.group_id, design.weight_seed, design.data_seed, trial_values.at_digits
),

crossed as (
    select
        group_id,
        at_digits,
        count(distinct weight_seed) as a,
        count(distinct data_seed) as b,
        list_avg(list(y order by weight_seed, data_seed)) as grand_mean
    from crossed_cells
    group by group_id, at_digits
),

weight_means as (
    select
        group_id,
        at_digits,
        weight_seed,
        list_avg(list(y order by data_seed)) as mean,
        min(y) as min,
        max(y) as max,
        list(data_seed order by data_seed) as data_seeds,
        list(y order by data_seed) as accuracy_by_data_seed,
        list(diverged order by data_seed) as diverged_by_data_seed
    from crossed_cells
    group by group_id, at_digits, weight_seed
),

-- The variance decomposition, for the subgrid itself (replicate 0: every seed once, in
-- order) and for each bootstrap replicate (1..resamples: a weight seeds and b data
-- seeds drawn with replacement, the same draws at every length), through the same sums.
-- grid: the subgrid's a x b values, centred on its grand mean (the sums below then
-- lose no digits), as one list, row-major: weight seed i, data seed j at i·b + j + 1
grids as (
    select
        crossed_cells.group_id,
        crossed_cells.at_digits,
        any_value(crossed.a) as a,
        any_value(crossed.b) as b,
        list(
            crossed_cells.y - crossed.grand_mean
            order by crossed_cells.weight_seed, crossed_cells.data_seed
        ) as grid
    from crossed_cells
    inner join crossed using (group_id, at_digits)
    group by crossed_cells.group_id, crossed_cells.at_digits
),

replicates as (
    select
        grids.*,
        unnest(range(params.resamples + 1)) as replicate
    from grids
    cross join params
),

-- the drawn rows (weight seeds) and columns (data seeds), as 0-based indices
draws as (
    select
        replicates.*,
        case
            when replicates.replicate = 0 then range(replicates.a)
            else [
                (hash(hash(params.boot_seed, replicates.group_id, 'weight',
                    replicates.replicate, draw)) % replicates.a)::bigint
                for draw in range(replicates.a)
            ]
        end as drawn_rows,
        case
            when replicates.replicate = 0 then range(replicates.b)
            else [
                (hash(hash(params.boot_seed, replicates.group_id, 'data',
                    replicates.replicate, draw)) % replicates.b)::bigint
                for draw in range(replicates.b)
            ]
        end as drawn_columns
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
    from tables
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

-- materialized: three CTEs read it, and DuckDB would otherwise run the resampling again
-- for each
estimates as materialized (
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
        where replicate > 0
    )
    on sigma2_weight, sigma2_data, sigma2_residual, component_share_weight,
        component_share_data, component_share_residual, ss_share_weight, ss_share_data,
        ss_share_residual
    into name quantity value value
),

replicate_sorted as (
    select
        replicate_values.group_id,
        replicate_values.at_digits,
        replicate_values.quantity,
        list_sort(list(replicate_values.value)) as sorted,
        count(*) as n,
        (count(*) - 1) * (1 - any_value(params.level)) / 2 as h_low,
        (count(*) - 1) * (1 + any_value(params.level)) / 2 as h_high
    from replicate_values
    cross join params
    group by replicate_values.group_id, replicate_values.at_digits, replicate_values.quantity
),

percentiles as (
    select
        group_id,
        at_digits,
        quantity,
        sorted[1 + floor(h_low)::bigint] + (h_low - floor(h_low))
        * (sorted[least(2 + floor(h_low)::bigint, n)] - sorted[1 + floor(h_low)::bigint]) as low,
        sorted[1 + floor(h_high)::bigint] + (h_high - floor(h_high))
        * (sorted[least(2 + floor(h_high)::bigint, n)] - sorted[1 + floor(h_high)::bigint]) as high
    from replicate_sorted
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

point_estimates as (
    select *
    from estimates
    where replicate = 0
),

undefined_replicates as (
    select
        group_id,
        at_digits,
        count(*) filter (where not varies) as boot_undefined
    from estimates
    where replicate > 0
    group by group_id, at_digits
),

-- each data order ranks the weight seeds on y rounded to 9 decimals; ties share their
-- average rank
rounded as (
    select
        *,
        round(y, 9) as y_rank
    from crossed_cells
),

ranks as (
    select
        group_id,
        at_digits,
        weight_seed,
        data_seed,
        y_rank,
        rank() over (partition by group_id, at_digits, data_seed order by y_rank)
        + (count(*) over (partition by group_id, at_digits, data_seed, y_rank) - 1) / 2.0
            as rank
    from rounded
),

rank_sums as (
    select
        group_id,
        at_digits,
        weight_seed,
        sum(rank) as rank_sum
    from ranks
    group by group_id, at_digits, weight_seed
),

tie_groups as (
    select
        group_id,
        at_digits,
        data_seed,
        count(*) as t
    from ranks
    group by group_id, at_digits, data_seed, y_rank
),

ties as (
    select
        group_id,
        at_digits,
        sum(t ^ 3 - t) as tie_sum
    from tie_groups
    group by group_id, at_digits
),

concordance as (
    select
        rank_sums.group_id,
        rank_sums.at_digits,
        12 * sum((rank_sums.rank_sum - crossed.b * (crossed.a + 1) / 2.0) ^ 2)
        / nullif(
            any_value(crossed.b) ^ 2 * (any_value(crossed.a) ^ 3 - any_value(crossed.a))
            - any_value(crossed.b) * any_value(ties.tie_sum),
            0
        ) as kendall_w
    from rank_sums
    inner join crossed using (group_id, at_digits)
    inner join ties using (group_id, at_digits)
    group by rank_sums.group_id, rank_sums.at_digits
),

friedman as (
    select
        concordance.group_id,
        concordance.at_digits,
        crossed.b * (crossed.a - 1) * concordance.kendall_w as chi2,
        crossed.a - 1 as df
    from concordance
    inner join crossed using (group_id, at_digits)
),

-- P(chi-square(df) >= chi2), see the header
friedman_p as (
    select
        group_id,
        at_digits,
        chi2,
        df,
        case
            when chi2 is null then null
            when chi2 <= 0 then 1.0
            when df % 2 = 0 then list_sum(
                [exp(j * ln(chi2 / 2) - lgamma(j + 1) - chi2 / 2) for j in range(df // 2)]
            )
            else erfc + coalesce(list_sum(
                [exp((j - 0.5) * ln(chi2 / 2) - lgamma(j + 0.5) - chi2 / 2)
                    for j in range(1, (df + 1) // 2)]
            ), 0)
        end as p
    from friedman
    cross join lateral (
        select sqrt(greatest(chi2, 0) / 2) as z, 1 / (1 + 0.5 * sqrt(greatest(chi2, 0) / 2)) as t
    ) as fit_input
    cross join lateral (
        select
            t * exp(
                -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
                + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
                + t * (-0.82215223 + t * 0.17087277))))))))
            ) as erfc
    ) as chebyshev
),

group_summary as (
    select
        crossed.group_id,
        crossed.at_digits,
        crossed.a as n_weight_seeds,
        crossed.b as n_data_seeds,
        crossed.grand_mean,
        estimates.ss_total,
        estimates.ss_weight,
        estimates.ss_data,
        estimates.ss_residual,
        estimates.ss_share_weight,
        estimates.ss_share_data,
        estimates.ss_share_residual,
        intervals.ss_share_weight_boot_low,
        intervals.ss_share_weight_boot_high,
        intervals.ss_share_data_boot_low,
        intervals.ss_share_data_boot_high,
        intervals.ss_share_residual_boot_low,
        intervals.ss_share_residual_boot_high,
        estimates.ms_weight,
        estimates.ms_data,
        estimates.ms_residual,
        estimates.sigma2_weight,
        mls_low(estimates.ms_weight, crossed.a - 1, estimates.ms_residual, (crossed.a - 1) * (crossed.b - 1),
            crossed.b, params.level) as sigma2_weight_low,
        mls_high(estimates.ms_weight, crossed.a - 1, estimates.ms_residual, (crossed.a - 1) * (crossed.b - 1),
            crossed.b, params.level) as sigma2_weight_high,
        intervals.sigma2_weight_boot_low,
        intervals.sigma2_weight_boot_high,
        estimates.sigma2_weight_truncated,
        estimates.sigma2_data,
        mls_low(estimates.ms_data, crossed.b - 1, estimates.ms_residual, (crossed.a - 1) * (crossed.b - 1),
            crossed.a, params.level) as sigma2_data_low,
        mls_high(estimates.ms_data, crossed.b - 1, estimates.ms_residual, (crossed.a - 1) * (crossed.b - 1),
            crossed.a, params.level) as sigma2_data_high,
        intervals.sigma2_data_boot_low,
        intervals.sigma2_data_boot_high,
        estimates.sigma2_data_truncated,
        estimates.sigma2_residual,
        mls_low(estimates.ms_residual, (crossed.a - 1) * (crossed.b - 1), 0, 1, 1, params.level)
            as sigma2_residual_low,
        mls_high(estimates.ms_residual, (crossed.a - 1) * (crossed.b - 1), 0, 1, 1, params.level)
            as sigma2_residual_high,
        intervals.sigma2_residual_boot_low,
        intervals.sigma2_residual_boot_high,
        estimates.component_share_weight,
        share_gci.weight_low as component_share_weight_low,
        share_gci.weight_high as component_share_weight_high,
        intervals.component_share_weight_boot_low,
        intervals.component_share_weight_boot_high,
        estimates.component_share_data,
        share_gci.data_low as component_share_data_low,
        share_gci.data_high as component_share_data_high,
        intervals.component_share_data_boot_low,
        intervals.component_share_data_boot_high,
        estimates.component_share_residual,
        share_gci.residual_low as component_share_residual_low,
        share_gci.residual_high as component_share_residual_high,
        intervals.component_share_residual_boot_low,
        intervals.component_share_residual_boot_high,
        share_coverage(crossed.a, crossed.b, crossed.grand_mean) as share_coverage,
        component_coverage(crossed.a, crossed.b, crossed.grand_mean) as component_coverage,
        undefined_replicates.boot_undefined,
        concordance.kendall_w,
        friedman_p.chi2 as friedman_chi2,
        friedman_p.df as friedman_df,
        friedman_p.p as friedman_p
    from crossed
    inner join point_estimates as estimates using (group_id, at_digits)
    left join intervals using (group_id, at_digits)
    left join undefined_replicates using (group_id, at_digits)
    inner join concordance using (group_id, at_digits)
    inner join friedman_p using (group_id, at_digits)
    cross join params
    cross join lateral (
        select share_intervals(
            estimates.ms_weight, estimates.ms_data, estimates.ms_residual, crossed.a, crossed.b, params.level
        ) as share_gci
    ) as generalized
),

-- the group's statistics at each measured length apart (001 F.9), one struct per length
length_rows as (
    select
        group_id,
        at_digits as digits,
        * exclude (group_id, at_digits, n_weight_seeds, n_data_seeds)
    from group_summary
    where at_digits > 0
),

by_length as (
    select
        group_id,
        list(length_rows order by digits) as by_length
    from length_rows
    group by group_id
),

labels as (
    select
        group_id,
        any_value(group_label) as group_label
    from design
    group by group_id
),

analysed as (
    select
        group_summary.group_id,
        weight_means.weight_seed,
        weight_means.mean,
        weight_means.min,
        weight_means.max,
        weight_means.min > params.threshold as lucky,
        rank_sums.rank_sum,
        weight_means.data_seeds,
        weight_means.accuracy_by_data_seed,
        weight_means.diverged_by_data_seed,
        group_summary.* exclude (group_id, at_digits),
        by_length.by_length
    from group_summary
    inner join weight_means using (group_id, at_digits)
    inner join rank_sums using (group_id, at_digits, weight_seed)
    left join by_length using (group_id)
    cross join params
    where group_summary.at_digits = 0
),

final as (
    select
        coverage.group_id,
        labels.group_label,
        group_digits.measured_digits,
        group_digits.measured_kind,
        analysed.weight_seed,
        analysed.mean,
        analysed.min,
        analysed.max,
        analysed.lucky,
        params.threshold,
        analysed.rank_sum,
        analysed.data_seeds,
        analysed.accuracy_by_data_seed,
        analysed.diverged_by_data_seed,
        analysed.n_weight_seeds,
        analysed.n_data_seeds,
        coverage.grid_weight_seeds,
        coverage.grid_data_seeds,
        coverage.missing_cells,
        left_out.seeds as left_out_seeds,
        coverage.skipped_reason,
        analysed.grand_mean,
        analysed.ss_total,
        analysed.ss_weight,
        analysed.ss_data,
        analysed.ss_residual,
        analysed.ss_share_weight,
        analysed.ss_share_weight_boot_low,
        analysed.ss_share_weight_boot_high,
        analysed.ss_share_data,
        analysed.ss_share_data_boot_low,
        analysed.ss_share_data_boot_high,
        analysed.ss_share_residual,
        analysed.ss_share_residual_boot_low,
        analysed.ss_share_residual_boot_high,
        analysed.ms_weight,
        analysed.ms_data,
        analysed.ms_residual,
        analysed.sigma2_weight,
        analysed.sigma2_weight_low,
        analysed.sigma2_weight_high,
        analysed.sigma2_weight_boot_low,
        analysed.sigma2_weight_boot_high,
        analysed.sigma2_weight_truncated,
        analysed.sigma2_data,
        analysed.sigma2_data_low,
        analysed.sigma2_data_high,
        analysed.sigma2_data_boot_low,
        analysed.sigma2_data_boot_high,
        analysed.sigma2_data_truncated,
        analysed.sigma2_residual,
        analysed.sigma2_residual_low,
        analysed.sigma2_residual_high,
        analysed.sigma2_residual_boot_low,
        analysed.sigma2_residual_boot_high,
        analysed.component_share_weight,
        analysed.component_share_weight_low,
        analysed.component_share_weight_high,
        analysed.component_share_weight_boot_low,
        analysed.component_share_weight_boot_high,
        analysed.component_share_data,
        analysed.component_share_data_low,
        analysed.component_share_data_high,
        analysed.component_share_data_boot_low,
        analysed.component_share_data_boot_high,
        analysed.component_share_residual,
        analysed.component_share_residual_low,
        analysed.component_share_residual_high,
        analysed.component_share_residual_boot_low,
        analysed.component_share_residual_boot_high,
        analysed.share_coverage,
        analysed.component_coverage,
        params.resamples,
        params.boot_seed,
        params.level,
        analysed.boot_undefined,
        analysed.kendall_w,
        analysed.friedman_chi2,
        analysed.friedman_df,
        analysed.friedman_p,
        analysed.by_length
    from coverage
    inner join labels using (group_id)
    left join group_digits using (group_id)
    left join analysed using (group_id)
    left join left_out using (group_id)
    cross join params
)

select *
from final
order by group_label, group_id, weight_seed
