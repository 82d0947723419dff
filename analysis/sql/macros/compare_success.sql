-- reads: wilson_centre, wilson_half
-- Do two configuration groups differ in how often their seeds succeed? The table
-- macro success_difference(observed_table, normal_z), defined on every connection
-- (analysis.query.prepare_connection), for compare.sql: per comparison of
-- observed_table (group_a, group_b, digits, paired, n_a, n_b, k_a, k_b: seed pairs and
-- successes of each group, success_a, success_b: their shares, and the 2 x 2 table of
-- the shared seed pairs both_succeed, only_a_succeeds, only_b_succeeds,
-- neither_succeeds), with z = Φ⁻¹((1 + level)/2) given as normal_z:
--
--   success_diff_newcombe_low, _high
--                     Newcombe's hybrid score interval from the Wilson intervals
--                     (l, u) of the two shares, Δ = p_a − p_b:
--                       Δ − sqrt((p_a − l_a)² − 2φ(p_a − l_a)(u_b − p_b) + (u_b − p_b)²)
--                       Δ + sqrt((u_a − p_a)² − 2φ(u_a − p_a)(p_b − l_b) + (p_b − l_b)²)
--                     with φ the correlation of the paired successes (Newcombe 1998,
--                     "Improved confidence intervals for the difference between binomial
--                     proportions based on paired data", method 10; 0 when a margin is
--                     empty) and φ = 0 unpaired (Newcombe 1998, "Interval estimation
--                     for the difference between independent proportions", method 10).
--   success_p_exact   paired: exact McNemar test, 2 · P(Binomial(f + g, 1/2) <= min(f, g))
--                     with f, g the seed pairs where only a or only b succeeds;
--                     unpaired: Fisher's exact test, the sum of the hypergeometric
--                     probabilities of the tables no more likely than the one seen
--                     (relative tolerance 1e-7). Capped at 1.

create or replace macro success_difference(observed_table, normal_z) as table
with

params as (
    select normal_z as z
),

observed as (
    select *
    from query_table(observed_table)
),

wilson_parts as (
    select
        observed.*,
        wilson_centre(success_a, n_a, z) as centre_a,
        wilson_half(success_a, n_a, z) as half_a,
        wilson_centre(success_b, n_b, z) as centre_b,
        wilson_half(success_b, n_b, z) as half_b
    from observed
    cross join params
),

wilson as (
    select
        *,
        case when k_a = 0 then 0 else centre_a - half_a end as low_a,
        case when k_a = n_a then 1 else centre_a + half_a end as high_a,
        case when k_b = 0 then 0 else centre_b - half_b end as low_b,
        case when k_b = n_b then 1 else centre_b + half_b end as high_b,
        case
            when not paired then 0
            else coalesce(
                (both_succeed * neither_succeeds - only_a_succeeds * only_b_succeeds)
                / nullif(sqrt(
                    (both_succeed + only_a_succeeds) * (only_b_succeeds + neither_succeeds)
                    * (both_succeed + only_b_succeeds) * (only_a_succeeds + neither_succeeds)
                ), 0),
                0
            )
        end as phi
    from wilson_parts
),

newcombe as (
    select
        group_a,
        group_b,
        digits,
        success_a - success_b - sqrt(greatest(
            (success_a - low_a) ^ 2 - 2 * phi * (success_a - low_a) * (high_b - success_b)
            + (high_b - success_b) ^ 2, 0
        )) as diff_low,
        success_a - success_b + sqrt(greatest(
            (high_a - success_a) ^ 2 - 2 * phi * (high_a - success_a) * (success_b - low_b)
            + (success_b - low_b) ^ 2, 0
        )) as diff_high
    from wilson
),


exact_tests as (
    select
        group_a,
        group_b,
        digits,
        case
            when paired then least(1, 2 * list_sum([
                exp(lgamma(discordant + 1) - lgamma(i + 1) - lgamma(discordant - i + 1)
                    - discordant * ln(2))
                for i in range(least(only_a_succeeds, only_b_succeeds) + 1)
            ]))
            else least(1, list_sum([
                probability for probability in hypergeometric
                if probability <= hypergeometric[k_a - lowest + 1] * (1 + 1e-7)
            ]))
        end as success_p_exact
    from observed
    cross join lateral (
        select
            only_a_succeeds + only_b_succeeds as discordant,
            greatest(0, n_a - (n_a + n_b - k_a - k_b)) as lowest,
            least(k_a + k_b, n_a) as highest
    ) as sizes
    -- P(X = x) = C(K, x) C(N − K, n_a − x) / C(N, n_a), K = k_a + k_b, N = n_a + n_b
    cross join lateral (
        select [
            exp(
                lgamma(k_a + k_b + 1) - lgamma(x + 1) - lgamma(k_a + k_b - x + 1)
                + lgamma(n_a + n_b - k_a - k_b + 1) - lgamma(n_a - x + 1)
                - lgamma(n_b - k_a - k_b + x + 1)
                - lgamma(n_a + n_b + 1) + lgamma(n_a + 1) + lgamma(n_b + 1)
            )
            for x in range(lowest, highest + 1)
        ] as hypergeometric
    ) as fisher
),

final as (
    select
        newcombe.group_a,
        newcombe.group_b,
        newcombe.digits,
        newcombe.diff_low as success_diff_newcombe_low,
        newcombe.diff_high as success_diff_newcombe_high,
        exact_tests.success_p_exact
    from newcombe
    inner join exact_tests using (group_a, group_b, digits)
)

select *
from final;
