-- reads: finished_eval, seed_success_interval
-- one row per: group × test length × τ
-- parameters: `threshold` (0.9), `level` (0.95)
-- How does a configuration's share of seeds that succeed fall as the bar rises? Its
-- performance profile (Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge of
-- the Statistical Precipice", NeurIPS; rliable's performance profiles): per
-- configuration group, test length and threshold τ, the share of the group's seed pairs
-- whose accuracy reaches τ, over the finished trials (done or diverged) at their final
-- evaluation step, as success.sql reads them. One threshold is success.sql's success,
-- the profile shows every other at once: a group that succeeds at 0.9 but falls off
-- just above, or one that nearly succeeds everywhere, tells apart here and not there.
--
--   tau                the threshold: 0, 0.05, ..., 1 and the study's `threshold`
--   at_threshold       whether tau is `threshold` (the row success.sql's p_success is)
--   share              the share of the n_seed_pairs seed pairs with accuracy >= tau: a
--                      seed pair's cell holds the share of its trials that reach tau (one
--                      trial, or several with perturbation replicates or one trial in two
--                      studies), share is the cells' mean
--   share_low, _high   its interval over seeds, success.sql's at every tau (the table
--                      macro seed_success_interval, success_interval.sql): Wilson's at
--                      the effective number of seed pairs of the crossed two-way
--                      variance; share_method says which case, share_n_effective the
--                      n_eff, share_coverage the coverage measured by simulation at the
--                      nearest design (docs/analysis.md)
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`):
--     threshold  default 0.9   success when accuracy >= threshold (one more tau)
--     level      default 0.95  one of 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999

with

params as (
    select
        coalesce(cast(getvariable('threshold') as double), 0.9) as threshold,
        coalesce(cast(getvariable('level') as double), 0.95) as level
),

-- i / 20 is the double nearest each decimal, as the literal 0.9 is: the threshold's own
-- row is then one of the grid's, not a second one a rounding apart
taus as (
    select i / 20 as tau
    from range(0, 21) as steps(i)
    union
    select threshold as tau
    from params
),

measured as (
    select
        group_id,
        group_label,
        weight_seed,
        data_seed,
        digits,
        in_distribution,
        accuracy
    from finished_eval
    where accuracy is not null
),

per_length as (
    select
        group_id,
        any_value(group_label) as group_label,
        digits,
        bool_and(in_distribution) as in_distribution,
        count(*) as n_trials
    from measured
    group by group_id, digits
),

-- a seed pair's trials in a fixed order, so its cell adds up the same at every tau and
-- as success.sql's cells do
pairs as (
    select
        group_id,
        digits,
        weight_seed,
        data_seed,
        list(accuracy order by accuracy) as accuracies
    from measured
    group by group_id, digits, weight_seed, data_seed
),

cells as (
    select
        {'group_id': pairs.group_id, 'digits': pairs.digits, 'tau': taus.tau} as key,
        pairs.weight_seed,
        pairs.data_seed,
        list_avg(list_transform(pairs.accuracies, lambda accuracy: (accuracy >= taus.tau)::double)) as s,
        list_avg(pairs.accuracies) as y
    from pairs
    cross join taus
),

final as (
    select
        per_length.group_id,
        per_length.group_label,
        per_length.digits,
        per_length.in_distribution,
        interval.key.tau,
        interval.key.tau = params.threshold as at_threshold,
        per_length.n_trials,
        interval.n_cells as n_seed_pairs,
        interval.p as share,
        interval.low as share_low,
        interval.high as share_high,
        interval.method as share_method,
        interval.n_eff as share_n_effective,
        interval.coverage as share_coverage,
        params.threshold,
        params.level
    from seed_success_interval(cells, (select level from params)) as interval
    inner join per_length
        on per_length.group_id = interval.key.group_id and per_length.digits = interval.key.digits
    cross join params
)

select *
from final
order by group_label, group_id, digits, tau
