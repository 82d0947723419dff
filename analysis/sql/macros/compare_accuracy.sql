-- reads: draw_index, percentile_high, percentile_low
-- Do two configuration groups differ in mean accuracy? The table macro
-- accuracy_difference(observed_table, n_resamples, seed, at_level), defined on every
-- connection (analysis.query.prepare_connection), for compare.sql: per comparison of
-- observed_table (group_a, group_b, digits, paired, values_a, values_b,
-- paired_differences, n_a, n_b, accuracy_diff), at `at_level`:
--
--   accuracy_diff_boot_low, _high
--                     percentile bootstrap interval: `n_resamples` replicates that
--                     draw, with replacement, the n seed pairs (paired) or each
--                     group's own n_a and n_b seed pairs (unpaired); quantiles as
--                     quantile_cont. Inside [−1, 1]; with few seed pairs too narrow.
--   accuracy_p_perm   permutation test of "no difference": paired, each difference's
--                     sign flipped at random; unpaired, the pooled values dealt at
--                     random into groups of n_a and n_b. T = the mean difference,
--                     p = (1 + #{replicates with |T*| >= |T|}) / (1 + n_resamples).
--                     Unlike the bootstrap it is valid for few seeds: 3 pairs can give
--                     no p below 1/4.
--
-- The draws come from hash(hash(seed, pair, length, purpose, replicate, draw)), so the
-- same parameters give the same result. (The outer hash: DuckDB combines the hashes of
-- several arguments so that their low bits only XOR, and hash(..., i) % 2 was the
-- same for every i < 6, which flipped all signs at once.)

create or replace macro accuracy_difference(observed_table, n_resamples, seed, at_level) as table
with

params as (
    select
        n_resamples as resamples,
        seed as boot_seed,
        at_level as level
),

observed as (
    select *
    from query_table(observed_table)
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
                replicates.paired_differences[1 + draw_index(hash(hash(params.boot_seed, replicates.group_a,
                    replicates.group_b, replicates.digits, 'pairs', replicates.replicate, draw)),
                    replicates.n_a)]
                for draw in range(replicates.n_a)
            ])
            else list_avg([
                replicates.values_a[1 + draw_index(hash(hash(params.boot_seed, replicates.group_a,
                    replicates.group_b, replicates.digits, 'a', replicates.replicate, draw)),
                    replicates.n_a)]
                for draw in range(replicates.n_a)
            ]) - list_avg([
                replicates.values_b[1 + draw_index(hash(hash(params.boot_seed, replicates.group_a,
                    replicates.group_b, replicates.digits, 'b', replicates.replicate, draw)),
                    replicates.n_b)]
                for draw in range(replicates.n_b)
            ])
        end as boot_diff,
        case
            when replicates.paired then list_avg([
                replicates.paired_differences[i + 1]
                * (1 - 2 * draw_index(hash(hash(params.boot_seed, replicates.group_a, replicates.group_b,
                    replicates.digits, 'signs', replicates.replicate, i)), 2))
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

final as (
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

-- Wilson intervals of the two shares (k = 0 and k = n: 0 and 1 exactly, which th

select *
from final;
