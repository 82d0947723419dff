-- reads: finished_trials, groups
-- one row per: group × environment (mixed groups only)
-- parameters: none
-- Did each configuration group's finished trials all run in one numerical environment?
-- One row per (group, environment) for the groups that ran in several; no rows when
-- none did (`lg-study status` prints nothing then, the report says so).
--
-- Training is repeatable on one machine and chaotic across machines: another CPU model
-- or instruction set, GPU, torch, CUDA or numpy build, or thread count gives other
-- numbers for the same config (orchestrator/store/provenance.py writes `environment`, one
-- line of those settings). A group whose seeds ran in two environments mixes that
-- floating-point chaos into its seed variance. environment is null for rows written
-- before lg-study recorded it. (Science versions need no check here: `lg-study run`
-- never lets a group hold trials whose numbers a later science change moved,
-- orchestrator/store/science_versions.py; the column science_versions lists the versions
-- that trained the group's trials in that environment.)

with

per_environment as (
    select
        groups.study,
        groups.group_id,
        any_value(groups.group_label) as group_label,
        finished_trials.environment,
        string_agg(distinct cast(finished_trials.science_version as varchar), ', '
                   order by cast(finished_trials.science_version as varchar)) as science_versions,
        count(*) as trials,
        string_agg(finished_trials.trial_id, ' ' order by finished_trials.trial_id) as trial_ids
    from finished_trials
    inner join groups using (study, trial_id)
    group by groups.study, groups.group_id, finished_trials.environment
),

mixed as (
    select
        study,
        group_id,
        count(*) as environments
    from per_environment
    group by study, group_id
    having count(*) > 1
),

final as (
    select
        per_environment.study,
        per_environment.group_label,
        coalesce(per_environment.environment, 'not recorded') as environment,
        per_environment.science_versions,
        per_environment.trials,
        mixed.environments as environments_in_group,
        per_environment.trial_ids
    from per_environment
    inner join mixed using (study, group_id)
)

select *
from final
order by study, group_label, environment
