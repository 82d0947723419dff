-- reads:
-- Do the data orders rank a configuration group's weight seeds alike (001 Fig. 11)?
-- The table macro seed_concordance(cells_table), defined on every connection
-- (analysis.query.prepare_connection), for lucky_tickets.sql: over the cells of a
-- crossed grid (group_id, at_digits, weight_seed, data_seed, y), per weight seed its
-- rank sum, and per (group_id, at_digits) Kendall's coefficient of concordance W with
-- Friedman's test.
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

create or replace macro seed_concordance(cells_table) as table
with

crossed as (
    select
        group_id,
        at_digits,
        count(distinct weight_seed) as a,
        count(distinct data_seed) as b
    from query_table(cells_table)
    group by group_id, at_digits
),

-- each data order ranks the weight seeds on y rounded to 9 decimals; ties share their
-- average rank
rounded as (
    select
        *,
        round(y, 9) as y_rank
    from query_table(cells_table)
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

-- P(chi-square(df) >= chi2), see above
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

final as (
    select
        rank_sums.group_id,
        rank_sums.at_digits,
        rank_sums.weight_seed,
        rank_sums.rank_sum,
        concordance.kendall_w,
        friedman_p.chi2 as friedman_chi2,
        friedman_p.df as friedman_df,
        friedman_p.p as friedman_p
    from rank_sums
    inner join concordance using (group_id, at_digits)
    inner join friedman_p using (group_id, at_digits)
)

select *
from final;
