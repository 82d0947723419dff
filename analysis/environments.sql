-- Did each configuration group's finished trials all run in one numerical environment
-- and under one science version? One row per (group, environment, science version) for
-- the groups that mix them; no rows when none does (`lg-study status` and the report
-- say so then).
--
-- Training is repeatable on one machine and chaotic across machines: another CPU model
-- or instruction set, GPU, torch, CUDA or numpy build, or thread count gives other
-- numbers for the same config (orchestrator/provenance.py writes `environment`, one
-- line of those settings). A group whose seeds ran in two environments mixes that
-- floating-point chaos into its seed variance; a group of two science versions
-- (lengthgen/science.py) mixes two codes' numbers. environment is null for rows written
-- before lg-study recorded it, and science_version for rows written before it had one.

with

per_environment as (
    select
        groups.study,
        groups.group_id,
        any_value(groups.group_label) as group_label,
        finished_trials.environment,
        finished_trials.science_version,
        count(*) as trials,
        string_agg(finished_trials.trial_id, ' ' order by finished_trials.trial_id) as trial_ids
    from finished_trials
    inner join groups using (study, trial_id)
    group by
        groups.study, groups.group_id, finished_trials.environment, finished_trials.science_version
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
        per_environment.science_version,
        per_environment.trials,
        mixed.environments as environments_in_group,
        per_environment.trial_ids
    from per_environment
    inner join mixed using (study, group_id)
)

select *
from final
order by study, group_label, environment, science_version
