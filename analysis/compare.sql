-- Do two configurations differ? For pairs of configuration groups (a, b) and each test
-- length both measured: the difference of their mean accuracy and of their success
-- rate, each with an interval and a p-value, the p-values Holm-corrected over all the
-- comparisons this file returns.
--
-- Which pairs: by default every pair of groups whose configs differ in exactly one
-- setting (differs_in, e.g. "model.pe: fire | rope"), the comparisons a grid study
-- makes along one axis; with `groups` (group ids, comma-separated) every pair among
-- those groups, however many settings they differ in. a is the pair's first group by
-- label.
--
-- The unit is the seed pair (weight seed, data seed) of a group: its accuracy at the
-- final evaluation (the mean of its trials when the same configuration ran in two
-- studies); finished trials only (done or diverged), a NaN accuracy is none.
-- design 'paired': the groups share at least 2 seed pairs measured at the length (e.g.
-- FIRE vs RoPE run on the same seeds). Only the shared seed pairs count (n_only_a,
-- n_only_b say how many seed pairs of each group are left out) and each difference is
-- taken within a seed pair. design 'unpaired': otherwise; all seed pairs of each group.
--
--   accuracy_diff     mean_a − mean_b (paired: the mean of the per-seed differences)
--   accuracy_diff_boot_low, _high
--                     percentile bootstrap interval at `level`: `resamples` replicates
--                     that draw, with replacement, the n seed pairs (paired) or each
--                     group's own n_a and n_b seed pairs (unpaired); quantiles as
--                     quantile_cont. Inside [−1, 1]; with few seed pairs too narrow.
--   accuracy_p_perm   permutation test of "no difference": paired, each difference's
--                     sign flipped at random; unpaired, the pooled values dealt at
--                     random into groups of n_a and n_b. T = the mean difference,
--                     p = (1 + #{replicates with |T*| >= |T|}) / (1 + resamples).
--                     Unlike the bootstrap it is valid for few seeds: 3 pairs can give
--                     no p below 1/4.
--   success_a, success_b, success_diff
--                     the shares of seed pairs whose accuracy reaches `threshold`
--                     (accuracy >= threshold) and their difference
--   success_diff_newcombe_low, _high
--                     Newcombe's hybrid score interval from the Wilson intervals
--                     (l, u) of the two shares, z = Φ⁻¹((1 + level)/2), Δ = p_a − p_b:
--                       Δ − sqrt((p_a − l_a)² − 2φ(p_a − l_a)(u_b − p_b) + (u_b − p_b)²)
--                       Δ + sqrt((u_a − p_a)² − 2φ(u_a − p_a)(p_b − l_b) + (p_b − l_b)²)
--                     with φ the correlation of the paired successes (Newcombe 1998,
--                     "Improved confidence intervals for the difference between binomial
--                     proportions based on paired data", method 10; 0 when a margin is
--                     empty) and φ = 0 unpaired (Newcombe 1998, "Interval estimation
--                     for the difference between independent proportions", method 10).
--                     Inside [−1, 1].
--   success_p_exact   paired: exact McNemar test, 2 · P(Binomial(f + g, 1/2) <= min(f, g))
--                     with f, g the seed pairs where only a or only b succeeds;
--                     unpaired: Fisher's exact test, the sum of the hypergeometric
--                     probabilities of the tables no more likely than the one seen
--                     (relative tolerance 1e-7). Capped at 1.
--   accuracy_p_holm, success_p_holm
--                     Holm's step-down adjustment over every row this file returns
--                     (holm_comparisons of them), accuracy and success apart: with the
--                     m p-values sorted, p_(i) becomes max_{j <= i} min(1, (m − j + 1) · p_(j)).
--                     A comparison is significant at `level` when its Holm p is below
--                     1 − level; narrowing `groups` or `digits` narrows the family
--                     (name the lengths a question is about before looking, or the
--                     family counts every in-distribution length too).
-- The draws come from hash(hash(boot_seed, pair, length, purpose, replicate, draw)), so
-- the same parameters give the same result. (The outer hash: DuckDB combines the
-- hashes of several arguments so that their low bits only XOR, and hash(..., i) % 2
-- was the same for every i < 6, which flipped all signs at once.)
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`):
--     groups     default: pairs differing in one setting; e.g. '3f2a9c1b04de,77aa01c3e9f0'
--     digits     default every length both groups measured; e.g. '8,10'
--     threshold  default 0.9   success when accuracy >= threshold
--     level      default 0.95  one of 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999
--     resamples  default 1000  bootstrap and permutation replicates per comparison
--     boot_seed  default 0     seed of those draws

with

params as (
    select
        coalesce(cast(getvariable('threshold') as double), 0.9) as threshold,
        coalesce(cast(getvariable('resamples') as bigint), 1000) as resamples,
        coalesce(cast(getvariable('boot_seed') as bigint), 0) as boot_seed,
        string_split(
            replace(trim(cast(getvariable('groups') as varchar), '[]'), ' ', ''), ','
        ) as groups,
        length_list(getvariable('digits')) as digits,
        given.level,
        normal_quantile(given.level) as z
    from (select coalesce(cast(getvariable('level') as double), 0.95) as level) as given
),

-- one value per group, seed pair and length: the mean of its trials (one per study)
cells as (
    select
        finished_eval.group_id,
        finished_eval.weight_seed,
        finished_eval.data_seed,
        finished_eval.digits,
        avg(finished_eval.accuracy) as accuracy
    from finished_eval
    cross join params
    where finished_eval.accuracy is not null
        and (params.digits is null or list_contains(params.digits, finished_eval.digits))
    group by finished_eval.group_id, finished_eval.weight_seed, finished_eval.data_seed, finished_eval.digits
),

group_configs as (
    select distinct
        group_id,
        group_label,
        group_config_json
    from groups
),

-- every setting of every group: leaves and whole lists, as "section.key" = value
settings as (
    select
        group_configs.group_id,
        substr(setting.fullkey, 3) as setting,
        setting.value ->> '$' as value
    from group_configs, json_tree(group_configs.group_config_json) as setting
    where setting.type <> 'OBJECT' and setting.fullkey not like '%[%'
),

pairs as (
    select
        a.group_id as group_a,
        b.group_id as group_b,
        a.group_label as label_a,
        b.group_label as label_b
    from group_configs as a
    inner join group_configs as b
        on a.group_label < b.group_label
        or (a.group_label = b.group_label and a.group_id < b.group_id)
),

pair_settings as (
    select distinct
        pairs.group_a,
        pairs.group_b,
        settings.setting
    from pairs
    inner join settings on settings.group_id in (pairs.group_a, pairs.group_b)
),

differences as (
    select
        pair_settings.group_a,
        pair_settings.group_b,
        list(
            pair_settings.setting || ': ' || coalesce(a.value, '(none)') || ' | '
            || coalesce(b.value, '(none)')
            order by pair_settings.setting
        ) as differs_in
    from pair_settings
    left join settings as a
        on a.group_id = pair_settings.group_a and a.setting = pair_settings.setting
    left join settings as b
        on b.group_id = pair_settings.group_b and b.setting = pair_settings.setting
    where a.value is distinct from b.value
    group by pair_settings.group_a, pair_settings.group_b
),

selected_pairs as (
    select
        pairs.*,
        differences.differs_in
    from pairs
    inner join differences using (group_a, group_b)
    cross join params
    where case
        when params.groups is null then len(differences.differs_in) = 1
        else list_contains(params.groups, pairs.group_a)
            and list_contains(params.groups, pairs.group_b)
    end
),

side_a as (
    select
        selected_pairs.group_a,
        selected_pairs.group_b,
        cells.digits,
        cells.weight_seed,
        cells.data_seed,
        cells.accuracy
    from selected_pairs
    inner join cells on cells.group_id = selected_pairs.group_a
),

side_b as (
    select
        selected_pairs.group_a,
        selected_pairs.group_b,
        cells.digits,
        cells.weight_seed,
        cells.data_seed,
        cells.accuracy
    from selected_pairs
    inner join cells on cells.group_id = selected_pairs.group_b
),

-- the seed pairs of either group at each length, side by side where both have them
matched as (
    select
        group_a,
        group_b,
        digits,
        weight_seed,
        data_seed,
        side_a.accuracy as accuracy_a,
        side_b.accuracy as accuracy_b,
        side_a.accuracy >= params.threshold as success_a,
        side_b.accuracy >= params.threshold as success_b,
        side_a.accuracy is not null and side_b.accuracy is not null as shared
    from side_a
    full outer join side_b using (group_a, group_b, digits, weight_seed, data_seed)
    cross join params
),

comparisons as (
    select
        group_a,
        group_b,
        digits,
        count(*) filter (where shared) >= 2 as paired,
        count(*) filter (where shared) as n_shared,
        count(accuracy_a) as n_all_a,
        count(accuracy_b) as n_all_b,
        list(accuracy_a order by weight_seed, data_seed) filter (where accuracy_a is not null)
            as all_a,
        list(accuracy_b order by weight_seed, data_seed) filter (where accuracy_b is not null)
            as all_b,
        list(accuracy_a - accuracy_b order by weight_seed, data_seed) filter (where shared)
            as paired_differences,
        list(accuracy_a order by weight_seed, data_seed) filter (where shared) as shared_a,
        list(accuracy_b order by weight_seed, data_seed) filter (where shared) as shared_b,
        -- the 2 x 2 table of the shared seed pairs' successes
        count(*) filter (where shared and success_a and success_b) as both_succeed,
        count(*) filter (where shared and success_a and not success_b) as only_a_succeeds,
        count(*) filter (where shared and not success_a and success_b) as only_b_succeeds,
        count(*) filter (where shared and not success_a and not success_b) as neither_succeeds,
        count(*) filter (where success_a) as all_success_a,
        count(*) filter (where success_b) as all_success_b
    from matched
    group by group_a, group_b, digits
    having count(accuracy_a) >= 1 and count(accuracy_b) >= 1
),

designed as (
    select
        group_a,
        group_b,
        digits,
        paired,
        case when paired then 'paired' else 'unpaired' end as design,
        case when paired then shared_a else all_a end as values_a,
        case when paired then shared_b else all_b end as values_b,
        paired_differences,
        case when paired then n_shared else n_all_a end as n_a,
        case when paired then n_shared else n_all_b end as n_b,
        case when paired then n_all_a - n_shared else 0 end as n_only_a,
        case when paired then n_all_b - n_shared else 0 end as n_only_b,
        case when paired then both_succeed + only_a_succeeds else all_success_a end as k_a,
        case when paired then both_succeed + only_b_succeeds else all_success_b end as k_b,
        both_succeed,
        only_a_succeeds,
        only_b_succeeds,
        neither_succeeds
    from comparisons
),

observed as (
    select
        *,
        list_avg(values_a) as mean_a,
        list_avg(values_b) as mean_b,
        list_avg(values_a) - list_avg(values_b) as accuracy_diff,
        k_a / n_a as success_a,
        k_b / n_b as success_b
    from designed
),

replicates as (
    select
        observed.group_a,
        observed.group_b,
        observed.digits,
        observed.paired,
        observed.values_a,
        observed.values_b,
        observed.paired_differences,
        observed.n_a,
        observed.n_b,
        unnest(range(params.resamples)) as replicate
    from observed
    cross join params
),

-- per replicate: a bootstrap mean difference and a permuted one
resampled as (
    select
        replicates.group_a,
        replicates.group_b,
        replicates.digits,
        case
            when replicates.paired then list_avg([
                replicates.paired_differences[(1 + hash(hash(params.boot_seed, replicates.group_a,
                    replicates.group_b, replicates.digits, 'pairs', replicates.replicate, draw))
                    % replicates.n_a)::bigint]
                for draw in range(replicates.n_a)
            ])
            else list_avg([
                replicates.values_a[(1 + hash(hash(params.boot_seed, replicates.group_a,
                    replicates.group_b, replicates.digits, 'a', replicates.replicate, draw))
                    % replicates.n_a)::bigint]
                for draw in range(replicates.n_a)
            ]) - list_avg([
                replicates.values_b[(1 + hash(hash(params.boot_seed, replicates.group_a,
                    replicates.group_b, replicates.digits, 'b', replicates.replicate, draw))
                    % replicates.n_b)::bigint]
                for draw in range(replicates.n_b)
            ])
        end as boot_diff,
        case
            when replicates.paired then list_avg([
                replicates.paired_differences[i + 1]
                * (1 - 2 * (hash(hash(params.boot_seed, replicates.group_a, replicates.group_b,
                    replicates.digits, 'signs', replicates.replicate, i)) % 2)::bigint)
                for i in range(replicates.n_a)
            ])
            else list_avg(shuffled[1:replicates.n_a]) - list_avg(shuffled[replicates.n_a + 1:])
        end as permuted_diff
    from replicates
    cross join params
    -- only unpaired comparisons deal: sorting every replicate's pooled values is most
    -- of this file's time, and a paired comparison flips signs instead
    cross join lateral (
        select case when replicates.paired then [] else [
            dealt.value for dealt in list_sort([
                {
                    'key': hash(hash(params.boot_seed, replicates.group_a, replicates.group_b,
                        replicates.digits, 'deal', replicates.replicate, i)),
                    'value': (replicates.values_a || replicates.values_b)[i + 1]
                }
                for i in range(replicates.n_a + replicates.n_b)
            ])
        ] end as shuffled
    ) as deal
),

replicate_summary as (
    select
        resampled.group_a,
        resampled.group_b,
        resampled.digits,
        list_sort(list(resampled.boot_diff)) as sorted,
        count(*) as n,
        -- 1e-12: the same |T| summed in another order differs in the last bits
        count(*) filter (
            where abs(resampled.permuted_diff) >= abs(observed.accuracy_diff) - 1e-12
        ) as as_extreme
    from resampled
    inner join observed using (group_a, group_b, digits)
    group by resampled.group_a, resampled.group_b, resampled.digits
),

bootstrap as (
    select
        replicate_summary.group_a,
        replicate_summary.group_b,
        replicate_summary.digits,
        percentile_low(replicate_summary.sorted, params.level) as accuracy_diff_boot_low,
        percentile_high(replicate_summary.sorted, params.level) as accuracy_diff_boot_high,
        (1 + replicate_summary.as_extreme) / (1 + replicate_summary.n) as accuracy_p_perm
    from replicate_summary
    cross join params
),

-- Wilson intervals of the two shares (k = 0 and k = n: 0 and 1 exactly, which the
-- formula misses by 1e-18), then Newcombe's interval of their difference
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

-- exact tests of the success counts
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

tested as (
    select
        observed.*,
        bootstrap.accuracy_diff_boot_low,
        bootstrap.accuracy_diff_boot_high,
        bootstrap.accuracy_p_perm,
        newcombe.diff_low as success_diff_newcombe_low,
        newcombe.diff_high as success_diff_newcombe_high,
        exact_tests.success_p_exact
    from observed
    left join bootstrap using (group_a, group_b, digits)
    inner join newcombe using (group_a, group_b, digits)
    inner join exact_tests using (group_a, group_b, digits)
),

-- Holm: the j-th smallest of m p-values becomes (m − j + 1) · p_(j), then the running
-- maximum of those over the sorted p-values, capped at 1
holm_ranks as (
    select
        *,
        count(accuracy_p_perm) over () as m_accuracy,
        row_number() over (order by accuracy_p_perm, group_a, group_b, digits) as j_accuracy,
        count(success_p_exact) over () as m_success,
        row_number() over (order by success_p_exact, group_a, group_b, digits) as j_success
    from tested
),

holm as (
    select
        *,
        m_accuracy as holm_comparisons,
        least(1, max((m_accuracy - j_accuracy + 1) * accuracy_p_perm) over (
            order by j_accuracy rows between unbounded preceding and current row
        )) as accuracy_p_holm,
        least(1, max((m_success - j_success + 1) * success_p_exact) over (
            order by j_success rows between unbounded preceding and current row
        )) as success_p_holm
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
        holm.n_a,
        holm.n_b,
        holm.n_only_a,
        holm.n_only_b,
        holm.mean_a,
        holm.mean_b,
        holm.accuracy_diff,
        holm.accuracy_diff_boot_low,
        holm.accuracy_diff_boot_high,
        holm.accuracy_p_perm,
        holm.accuracy_p_holm,
        holm.success_a,
        holm.success_b,
        holm.success_a - holm.success_b as success_diff,
        -- greatest/least: clamp round-off only
        greatest(holm.success_diff_newcombe_low, -1) as success_diff_newcombe_low,
        least(holm.success_diff_newcombe_high, 1) as success_diff_newcombe_high,
        holm.success_p_exact,
        holm.success_p_holm,
        holm.holm_comparisons,
        params.threshold,
        params.level,
        params.resamples,
        params.boot_seed
    from holm
    inner join selected_pairs using (group_a, group_b)
    cross join params
)

select *
from final
order by label_a, label_b, group_a, group_b, digits
