-- reads: final_eval, trials
-- one row per: trial × test length
-- parameters: none
-- How accurate is each trial at each test length at the evaluation it reports (its
-- last, or with eval.select best_long_loss the one chosen: `checkpoint`), with its
-- status? The rows behind the table `lg-study run` prints when a study ends
-- (orchestrator.console.run_table), which keeps the trials of the run's own grid and lays
-- them out by configuration group. A trial that diverged before its first evaluation
-- has no eval rows and is listed with null digits.

with

final as (
    select
        trials.trial_id,
        trials.status,
        final_eval.digits,
        final_eval.in_distribution,
        final_eval.accuracy,
        final_eval.checkpoint
    from trials
    left join final_eval using (study, trial_id)
)

select *
from final
order by trial_id, digits
