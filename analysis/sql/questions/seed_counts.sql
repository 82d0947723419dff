-- reads: finished_trials, groups, trials
-- one row per: group
-- parameters: none
-- How many weight seeds does each configuration group have so far, and how many of its
-- trials are not finished? The rows behind a study's `seeds: until` target
-- (orchestrator/running/seed_target.py): per group, the weight seeds of its trials in any
-- status (a seed counts from its first trials row, so an interrupted round is planned
-- again with the same seeds), the trials, and those running or failed.

with

final as (
    select
        groups.group_id,
        any_value(groups.group_label) as group_label,
        list_sort(list(distinct trials.weight_seed)) as weight_seeds,
        count(*) as trials,
        count(*) - count(finished_trials.trial_id) as unfinished
    from groups
    inner join trials using (study, trial_id)
    left join finished_trials using (study, trial_id)
    group by groups.group_id
)

select *
from final
order by group_label, group_id
