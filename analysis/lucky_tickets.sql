-- Are there lucky weight tickets (001 Fig. 11, F.9)? For every configuration group
-- whose finished trials cross weight seeds × data seeds completely (at least 2 × 2,
-- each pair exactly once): how much of the variance of out-of-distribution accuracy
-- the weight seed explains, how much the data seed, how much is left; and per weight
-- seed its mean, min and max over data orders, and whether it is a lucky ticket.
-- One row per (group, weight seed); the group's numbers repeat on its rows.
--
-- The measured value y(w, d) of a trial is its mean accuracy over the out-of-
-- distribution test lengths at its final evaluation step (or over the lengths in
-- `digits` when given).
--
-- Variance shares: two-way ANOVA without replication over the full crossed table of
-- a weight seeds × b data seeds, with m the grand mean, m_w and m_d the row and
-- column means:
--     SS_weight   = b · Σ_w (m_w − m)²
--     SS_data     = a · Σ_d (m_d − m)²
--     SS_residual = Σ_wd (y − m_w − m_d + m)²   (weight × data interaction + noise)
--     SS_total    = Σ_wd (y − m)²  = SS_weight + SS_data + SS_residual
-- share_* = SS_* / SS_total (null when every trial scored the same).
--
-- Lucky ticket: a weight seed whose minimum over data orders is above `threshold`.
--
-- Rank agreement: Kendall's coefficient of concordance W of the weight seeds' ranks
-- across data orders (each data order ranks the a weight seeds by y; ties get their
-- average rank). With R_w the sum of weight seed w's ranks over the b data orders:
--     W = 12 · Σ_w (R_w − b(a + 1)/2)² / (b²(a³ − a) − b · Σ_d Σ_ties (t³ − t))
-- 1 = every data order ranks the weight seeds alike (the weight seed decides), 0 = no
-- agreement; null when every data order ties all weight seeds.
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`, or
-- `SET VARIABLE name = value` in the DuckDB client):
--     threshold  default 0.9   lucky when min over data orders > threshold
--     digits     default all out-of-distribution lengths; e.g. '50,100'

with

params as (
    select
        coalesce(cast(getvariable('threshold') as double), 0.9) as threshold,
        cast(
            string_split(replace(trim(cast(getvariable('digits') as varchar), '[]'), ' ', ''), ',')
            as bigint[]
        ) as digits
),

finished as (
    select trial_id
    from trials
    where status in ('done', 'diverged')
),

measured as (
    select
        groups.group_id,
        groups.group_label,
        groups.weight_seed,
        groups.data_seed,
        eval.trial_id,
        eval.digits,
        eval.accuracy
    from final_eval as eval
    inner join finished using (trial_id)
    inner join groups using (trial_id)
    cross join params
    where
        case
            when params.digits is null then not eval.in_distribution
            else list_contains(params.digits, eval.digits)
        end
),

cells as (
    select
        group_id,
        group_label,
        weight_seed,
        data_seed,
        avg(accuracy) as y
    from measured
    group by group_id, group_label, weight_seed, data_seed
),

crossed as (
    select
        group_id,
        count(distinct weight_seed) as a,
        count(distinct data_seed) as b,
        avg(y) as grand_mean
    from cells
    group by group_id
    having
        count(distinct weight_seed) >= 2
        and count(distinct data_seed) >= 2
        and count(*) = count(distinct weight_seed) * count(distinct data_seed)
),

crossed_cells as (
    select
        cells.*,
        crossed.a,
        crossed.b,
        crossed.grand_mean
    from cells
    inner join crossed using (group_id)
),

weight_means as (
    select
        group_id,
        weight_seed,
        avg(y) as mean,
        min(y) as min,
        max(y) as max,
        list(data_seed order by data_seed) as data_seeds,
        list(y order by data_seed) as ood_accuracy_by_data_seed
    from crossed_cells
    group by group_id, weight_seed
),

data_means as (
    select
        group_id,
        data_seed,
        avg(y) as mean
    from crossed_cells
    group by group_id, data_seed
),

sums_of_squares as (
    select
        crossed_cells.group_id,
        sum((crossed_cells.y - crossed_cells.grand_mean) ^ 2) as ss_total,
        sum(
            (crossed_cells.y - weight_means.mean - data_means.mean + crossed_cells.grand_mean) ^ 2
        ) as ss_residual
    from crossed_cells
    inner join weight_means using (group_id, weight_seed)
    inner join data_means using (group_id, data_seed)
    group by crossed_cells.group_id
),

ss_weight as (
    select
        weight_means.group_id,
        any_value(crossed.b) * sum((weight_means.mean - crossed.grand_mean) ^ 2) as ss_weight
    from weight_means
    inner join crossed using (group_id)
    group by weight_means.group_id
),

ss_data as (
    select
        data_means.group_id,
        any_value(crossed.a) * sum((data_means.mean - crossed.grand_mean) ^ 2) as ss_data
    from data_means
    inner join crossed using (group_id)
    group by data_means.group_id
),

-- each data order ranks the weight seeds; ties share their average rank
ranks as (
    select
        group_id,
        weight_seed,
        data_seed,
        y,
        rank() over (partition by group_id, data_seed order by y)
        + (count(*) over (partition by group_id, data_seed, y) - 1) / 2.0 as rank
    from crossed_cells
),

rank_sums as (
    select
        group_id,
        weight_seed,
        sum(rank) as rank_sum
    from ranks
    group by group_id, weight_seed
),

tie_groups as (
    select
        group_id,
        data_seed,
        count(*) as t
    from ranks
    group by group_id, data_seed, y
),

ties as (
    select
        group_id,
        sum(t ^ 3 - t) as tie_sum
    from tie_groups
    group by group_id
),

concordance as (
    select
        rank_sums.group_id,
        12 * sum((rank_sums.rank_sum - crossed.b * (crossed.a + 1) / 2.0) ^ 2)
        / nullif(
            any_value(crossed.b) ^ 2 * (any_value(crossed.a) ^ 3 - any_value(crossed.a))
            - any_value(crossed.b) * any_value(ties.tie_sum),
            0
        ) as kendall_w
    from rank_sums
    inner join crossed using (group_id)
    inner join ties using (group_id)
    group by rank_sums.group_id
),

group_summary as (
    select
        crossed.group_id,
        crossed.a as n_weight_seeds,
        crossed.b as n_data_seeds,
        crossed.grand_mean,
        sums_of_squares.ss_total,
        ss_weight.ss_weight,
        ss_data.ss_data,
        sums_of_squares.ss_residual,
        ss_weight.ss_weight / nullif(sums_of_squares.ss_total, 0) as share_weight,
        ss_data.ss_data / nullif(sums_of_squares.ss_total, 0) as share_data,
        sums_of_squares.ss_residual / nullif(sums_of_squares.ss_total, 0) as share_residual,
        concordance.kendall_w
    from crossed
    inner join sums_of_squares using (group_id)
    inner join ss_weight using (group_id)
    inner join ss_data using (group_id)
    inner join concordance using (group_id)
),

group_digits as (
    select
        group_id,
        any_value(group_label) as group_label,
        list(distinct digits order by digits) as measured_digits
    from measured
    group by group_id
),

final as (
    select
        group_summary.group_id,
        group_digits.group_label,
        group_digits.measured_digits,
        weight_means.weight_seed,
        weight_means.mean,
        weight_means.min,
        weight_means.max,
        weight_means.min > params.threshold as lucky,
        params.threshold,
        rank_sums.rank_sum,
        weight_means.data_seeds,
        weight_means.ood_accuracy_by_data_seed,
        group_summary.n_weight_seeds,
        group_summary.n_data_seeds,
        group_summary.grand_mean,
        group_summary.ss_total,
        group_summary.ss_weight,
        group_summary.ss_data,
        group_summary.ss_residual,
        group_summary.share_weight,
        group_summary.share_data,
        group_summary.share_residual,
        group_summary.kendall_w
    from group_summary
    inner join group_digits using (group_id)
    inner join weight_means using (group_id)
    inner join rank_sums using (group_id, weight_seed)
    cross join params
)

select *
from final
order by group_label, group_id, weight_seed
