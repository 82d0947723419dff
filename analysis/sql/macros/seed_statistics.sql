-- reads: accuracy_variance_high, seed_bootstrap, seed_components, seed_concordance
-- What does the seed analysis say of a configuration group's crossed grid at each
-- length, all together? The table macro seed_statistics(cells_table, n_resamples, seed,
-- at_level), defined on every connection (analysis.query.prepare_connection), for
-- lucky_tickets.sql (its group columns, and each struct of by_length): over the cells
-- of each group's complete subgrid (group_id, at_digits, weight_seed, data_seed, y,
-- test_noise), per (group_id, at_digits) the seeds a x b and grand mean, the variance
-- components and shares with their intervals (seed_components.sql), their bootstrap
-- intervals (seed_bootstrap.sql), the rank agreement (seed_concordance.sql) and the
-- test-set noise in the residual, in that file's column order.
--
-- Test-set noise: a cell's y is an accuracy over a finite set of questions, so it
-- carries a binomial variance s²_wd = p(1 − p)/n (test_noise: lucky_tickets.sql
-- estimates it per cell) that no seed makes. The residual's projection has the same
-- diagonal (1 − 1/a)(1 − 1/b) at every cell of a balanced grid, so E[MS_residual] =
-- σ²_interaction + mean_wd s²_wd: sigma2_test_noise is that mean, a part of
-- sigma2_residual, and sigma2_residual_seeds = max(0, sigma2_residual −
-- sigma2_test_noise) the weight × data interaction the seeds make;
-- test_noise_share_of_residual = sigma2_test_noise / sigma2_residual (at most 1; null
-- when the residual is 0). The noise enters E[MS_weight] and E[MS_data] by the same
-- mean (the row and column projections' diagonals are (a − 1)/ab and (b − 1)/ab), so
-- the differences behind sigma2_weight and sigma2_data cancel it and they need no
-- correction. Jordan (ICLR 2024, "On the variance of neural network training with
-- respect to test sets and distributions") finds runs apart only by seed differ on a
-- fixed test set about as independent per-question coin flips would make them; every
-- trial of a group answers the same questions (the eval seed stays in the group), and
-- questions of unequal difficulty make those flips' variance mean_q p_q(1 − p_q)/n ≤
-- p(1 − p)/n: the share is the upper end of what the finite test set explains.

create or replace macro seed_statistics(cells_table, n_resamples, seed, at_level) as table
with

crossed as (
    select
        group_id,
        at_digits,
        count(distinct weight_seed) as a,
        count(distinct data_seed) as b,
        list_avg(list(y order by weight_seed, data_seed)) as grand_mean,
        -- null when a cell's noise is unknown (fewer than 2 questions)
        case when count(test_noise) = count(*) then
            list_avg(list(test_noise order by weight_seed, data_seed))
        end as sigma2_test_noise
    from query_table(cells_table)
    group by group_id, at_digits
),

-- the subgrid's a x b values at each length, centred on its grand mean (the sums of
-- squares then lose no digits), as one list, row-major: weight seed i, data seed j at
-- i·b + j + 1
grids as (
    select
        crossed_cells.group_id,
        crossed_cells.at_digits,
        any_value(crossed.a) as a,
        any_value(crossed.b) as b,
        any_value(crossed.grand_mean) as grand_mean,
        list(
            crossed_cells.y - crossed.grand_mean
            order by crossed_cells.weight_seed, crossed_cells.data_seed
        ) as grid
    from query_table(cells_table) as crossed_cells
    inner join crossed using (group_id, at_digits)
    group by crossed_cells.group_id, crossed_cells.at_digits
),

components as (
    select *
    from seed_components(grids, at_level)
),

bootstrap as (
    select *
    from seed_bootstrap(
        grids,
        n_resamples,
        seed,
        at_level
    )
),

concordance as (
    select *
    from seed_concordance(cells_table)
),

group_concordance as (
    select
        group_id,
        at_digits,
        any_value(kendall_w) as kendall_w,
        any_value(friedman_chi2) as friedman_chi2,
        any_value(friedman_df) as friedman_df,
        any_value(friedman_p) as friedman_p
    from concordance
    group by group_id, at_digits
),

final as (
    select
        crossed.group_id,
        crossed.at_digits,
        crossed.a as n_weight_seeds,
        crossed.b as n_data_seeds,
        crossed.grand_mean,
        components.ss_total,
        components.ss_weight,
        components.ss_data,
        components.ss_residual,
        components.ss_share_weight,
        components.ss_share_data,
        components.ss_share_residual,
        bootstrap.ss_share_weight_boot_low,
        bootstrap.ss_share_weight_boot_high,
        bootstrap.ss_share_data_boot_low,
        bootstrap.ss_share_data_boot_high,
        bootstrap.ss_share_residual_boot_low,
        bootstrap.ss_share_residual_boot_high,
        components.ms_weight,
        components.ms_data,
        components.ms_residual,
        components.sigma2_weight,
        components.sigma2_weight_low,
        components.sigma2_weight_high,
        bootstrap.sigma2_weight_boot_low,
        accuracy_variance_high(bootstrap.sigma2_weight_boot_high) as sigma2_weight_boot_high,
        components.sigma2_weight_truncated,
        components.sigma2_data,
        components.sigma2_data_low,
        components.sigma2_data_high,
        bootstrap.sigma2_data_boot_low,
        accuracy_variance_high(bootstrap.sigma2_data_boot_high) as sigma2_data_boot_high,
        components.sigma2_data_truncated,
        components.sigma2_residual,
        components.sigma2_residual_low,
        components.sigma2_residual_high,
        bootstrap.sigma2_residual_boot_low,
        accuracy_variance_high(bootstrap.sigma2_residual_boot_high) as sigma2_residual_boot_high,
        components.component_share_weight,
        components.share_gci.weight_low as component_share_weight_low,
        components.share_gci.weight_high as component_share_weight_high,
        bootstrap.component_share_weight_boot_low,
        bootstrap.component_share_weight_boot_high,
        components.component_share_data,
        components.share_gci.data_low as component_share_data_low,
        components.share_gci.data_high as component_share_data_high,
        bootstrap.component_share_data_boot_low,
        bootstrap.component_share_data_boot_high,
        components.component_share_residual,
        components.share_gci.residual_low as component_share_residual_low,
        components.share_gci.residual_high as component_share_residual_high,
        bootstrap.component_share_residual_boot_low,
        bootstrap.component_share_residual_boot_high,
        components.share_coverage,
        components.component_coverage,
        bootstrap.boot_undefined,
        group_concordance.kendall_w,
        group_concordance.friedman_chi2,
        group_concordance.friedman_df,
        group_concordance.friedman_p,
        crossed.sigma2_test_noise,
        -- greatest and least skip a null: an unknown noise must stay unknown
        case when crossed.sigma2_test_noise is not null then
            greatest(components.sigma2_residual - crossed.sigma2_test_noise, 0)
        end as sigma2_residual_seeds,
        case when components.sigma2_residual > 0 and crossed.sigma2_test_noise is not null then
            least(crossed.sigma2_test_noise / components.sigma2_residual, 1)
        end as test_noise_share_of_residual
    from crossed
    inner join components using (group_id, at_digits)
    left join bootstrap using (group_id, at_digits)
    inner join group_concordance using (group_id, at_digits)
)

select *
from final;
