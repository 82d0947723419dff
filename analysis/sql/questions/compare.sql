-- reads: accuracy_difference, bootstrap_seed, finished_eval, group_pairs, groups, length_list, normal_quantile, resample_count, success_difference
-- Do two configurations differ? For pairs of configuration groups (a, b) and each test
-- length both measured: the difference of their mean accuracy and of their success
-- rate, each with an interval and a p-value, the p-values Holm-corrected over all the
-- comparisons this file returns.
--
-- Which pairs: by default every pair of groups whose configs differ in exactly one
-- setting (differs_in, e.g. "model.pe: fire | rope"; group_pairs.sql), the comparisons
-- a grid study makes along one axis; with `groups` (group ids, comma-separated) every
-- pair among those groups, however many settings they differ in. a is the pair's first
-- group by label.
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
--   accuracy_diff_boot_low, _high, accuracy_p_perm
--                     percentile bootstrap interval at `level` and permutation test
--                     (compare_accuracy.sql)
--   success_a, success_b, success_diff
--                     the shares of seed pairs whose accuracy reaches `threshold`
--                     (accuracy >= threshold) and their difference
--   success_diff_newcombe_low, _high, success_p_exact
--                     Newcombe's interval of the difference at `level` and the exact
--                     McNemar (paired) or Fisher (unpaired) test (compare_success.sql)
--   accuracy_p_holm, success_p_holm
--                     Holm's step-down adjustment over every row this file returns
--                     (holm_comparisons of them), accuracy and success apart: with the
--                     m p-values sorted, p_(i) becomes max_{j <= i} min(1, (m − j + 1) · p_(j)).
--                     A comparison is significant at `level` when its Holm p is below
--                     1 − level; narrowing `groups` or `digits` narrows the family
--                     (name the lengths a question is about before looking, or the
--                     family counts every in-distribution length too).
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
        resample_count(getvariable('resamples')) as resamples,
        bootstrap_seed(getvariable('boot_seed')) as boot_seed,
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

observed as materialized (
    select
        *,
        list_avg(values_a) as mean_a,
        list_avg(values_b) as mean_b,
        list_avg(values_a) - list_avg(values_b) as accuracy_diff,
        k_a / n_a as success_a,
        k_b / n_b as success_b
    from designed
),

accuracy as (
    select *
    from accuracy_difference(
        observed,
        (select resamples from params),
        (select boot_seed from params),
        (select level from params)
    )
),

success as (
    select *
    from success_difference(observed, (select z from params))
),

tested as (
    select
        observed.*,
        accuracy.accuracy_diff_boot_low,
        accuracy.accuracy_diff_boot_high,
        accuracy.accuracy_p_perm,
        success.success_diff_newcombe_low,
        success.success_diff_newcombe_high,
        success.success_p_exact
    from observed
    left join accuracy using (group_a, group_b, digits)
    inner join success using (group_a, group_b, digits)
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
