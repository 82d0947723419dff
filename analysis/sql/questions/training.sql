-- reads: eval, finished_trials, seed_listed, train, trial_identity
-- one row per: trial × eval step × test length
-- parameters: `grok_threshold` (0.99)
-- How does accuracy at each test length develop over training (001 App. F.3), and at
-- which step does a trial "grok" (001 Fig. 6)? One row per finished trial, evaluation
-- step and test length: the accuracy, the trial's mean in-distribution and mean
-- out-of-distribution accuracy at that step, the last logged training loss at or
-- before it, and the trial's grokking step.
--
-- grok_step is the first evaluation step at which the mean accuracy over the
-- in-distribution test lengths reaches `grok_threshold`; null when it never does.
-- The evaluations are `eval.every` steps apart, so the true step lies in the interval
-- before it.
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`, or
-- `SET VARIABLE name = value` in the DuckDB client):
--     grok_threshold  default 0.99

with

params as (
    select coalesce(cast(getvariable('grok_threshold') as double), 0.99) as grok_threshold
),

evaluations as (
    select
        trial_identity.* exclude (study, trial_id),
        eval.study,
        eval.trial_id,
        eval.step,
        eval.digits,
        eval.in_distribution,
        eval.accuracy
    from eval
    inner join finished_trials using (study, trial_id)
    inner join trial_identity('seeds_listed') as trial_identity using (study, trial_id)
),

per_step as (
    select
        study,
        trial_id,
        step,
        -- averaged by length, as an avg() adds in whatever order DuckDB's threads finish
        list_avg(list(accuracy order by digits) filter (where in_distribution)) as in_distribution_accuracy,
        list_avg(list(accuracy order by digits) filter (where not in_distribution)) as ood_accuracy
    from evaluations
    group by study, trial_id, step
),

grokking as (
    select
        per_step.study,
        per_step.trial_id,
        min(per_step.step) filter (
            where per_step.in_distribution_accuracy >= params.grok_threshold
        ) as grok_step,
        any_value(params.grok_threshold) as grok_threshold
    from per_step
    cross join params
    group by per_step.study, per_step.trial_id
),

with_loss as (
    select
        per_step.*,
        train.loss
    from per_step
    asof left join train
        on per_step.study = train.study
        and per_step.trial_id = train.trial_id
        and per_step.step >= train.step
),

final as (
    select
        evaluations.group_id,
        evaluations.group_label,
        evaluations.study,
        evaluations.trial_id,
        columns(lambda c: seed_listed(c)),  -- evaluations': with_loss and grokking have no seeds
        evaluations.step,
        evaluations.digits,
        evaluations.in_distribution,
        evaluations.accuracy,
        with_loss.in_distribution_accuracy,
        with_loss.ood_accuracy,
        with_loss.loss,
        grokking.grok_step,
        grokking.grok_threshold
    from evaluations
    inner join with_loss using (study, trial_id, step)
    inner join grokking using (study, trial_id)
)

select *
from final
order by group_label, group_id, columns(lambda c: seed_listed(c)), trial_id, study, step, digits
