-- reads: eval, finished_trials, last_steps, trial_identity
-- The evaluation each trial reports, over the views of tables.sql and groups.sql:
-- `last_eval`, `final_eval` and `finished_eval`.

-- final_eval: each trial's evaluation rows at the step it reports, the rows that
-- variance, lucky_tickets, final_accuracy and summary compare across trials: its last
-- evaluated step, or, for a trial with eval.select best_long_loss (its rows carry
-- long_loss), the evaluated step with the lowest loss on the long-length validation set,
-- the earliest of equals (Cho et al. 2024 report that checkpoint). `checkpoint` says
-- which (final, or lowest long-length loss) and `last_step` is the trial's last
-- evaluated step, whose rows last_eval holds, so a chosen checkpoint is always shown
-- beside the final one. An accuracy of NaN (a length with no question) reads as null:
-- DuckDB sorts NaN above every number, so it would otherwise win a maximum or pass any
-- threshold. (The test is `not isfinite`: DuckDB 2.0 folds isnan() on a Parquet column
-- to false from the file's statistics, which leave NaN out.)

create or replace temp view last_eval as
with

final as (
    select eval.* replace (
        case when isfinite(eval.accuracy) then eval.accuracy end as accuracy
    )
    from eval
    inner join last_steps('eval') using (study, trial_id, step)
)

select * from final;

create or replace temp view final_eval as
with

step_losses as (
    select distinct
        study,
        trial_id,
        step,
        long_loss
    from eval
    where long_loss is not null
),

lowest as (
    select
        study,
        trial_id,
        min(long_loss) as long_loss
    from step_losses
    group by study, trial_id
),

selected_steps as (
    select
        study,
        trial_id,
        min(step) as step
    from step_losses
    inner join lowest using (study, trial_id, long_loss)
    group by study, trial_id
),

last_evaluated as (
    select
        study,
        trial_id,
        step as last_step
    from last_steps('eval')
),

reported_steps as (
    select
        last_evaluated.study,
        last_evaluated.trial_id,
        coalesce(selected_steps.step, last_evaluated.last_step) as step,
        last_evaluated.last_step,
        case when selected_steps.step is null then 'final' else 'lowest long-length loss' end as checkpoint
    from last_evaluated
    left join selected_steps using (study, trial_id)
),

final as (
    select
        eval.* replace (
            case when isfinite(eval.accuracy) then eval.accuracy end as accuracy
        ),
        reported_steps.checkpoint,
        reported_steps.last_step
    from eval
    inner join reported_steps using (study, trial_id, step)
)

select * from final;



-- finished_eval: the final_eval rows of the finished trials, with each trial's group
-- and seeds: what variance, success, compare, final_accuracy, replicates and
-- lucky_tickets measure.

create or replace temp view finished_eval as
select
    apart.* exclude (study, trial_id),
    finished_trials.status,
    final_eval.*
from final_eval
inner join finished_trials using (study, trial_id)
inner join trial_identity('seeds_apart') as apart using (study, trial_id);
