-- reads: seed_apart, trials, without_seeds_apart
-- finished_trials: the trials whose results are final, the only ones the analysis files
-- compare. A trial is finished when it is done, or diverged: a diverged trial keeps what
-- it measured before its loss went non-finite, and dropping it would flatter its group
-- (results_contract/trial_status.py, FINISHED; `lg-study run` skips the same trials).
-- Running (or interrupted), failed and pruned trials are not: a pruned trial's seed
-- was stopped early by a search's pruner, and is no sample of the final accuracy.

create or replace temp view finished_trials as
select *
from trials
where status in ('done', 'diverged');


-- `groups`: which configuration group is each trial in? A group is the set of trials
-- whose resolved configs are equal except for the weight, the data and the perturb seed
-- (the eval seed is fixed per study and stays in the key). One row per trial;
-- perturb_seed 0 is an unperturbed trial.
--
-- group_id and group_label are columns of `trials`, written with each trial's row by
-- the one Python definition (results_contract/groups.py) that also gives its MLflow tags
-- `group` and `group_label`: group_id hashes the trial's identity less its weight and
-- data seeds, as trial_id hashes the identity; group_label is task/pe/size/distribution
-- followed by the settings that tell apart the study's groups sharing those four, e.g.
-- "addition/rope/tiny/uniform_length train.lr=0.001". A group shows one label per
-- study, that of its latest trial (the study's design when it was last run).
--
-- group_config_json, the group's config without its seeds apart (identity.sql), lists its settings
-- for compare.sql (group_pairs.sql); it does not decide groups.
--
-- Rows written before the group columns existed get them from `lg-study migrate` (or
-- the next `lg-study run` of their study), which analysis/query.py asks for when it
-- finds such rows (orchestrator/store/trial_rows.py, add_group_columns).

create or replace temp view groups as
with

grouped as (
    select
        study,
        trial_id,
        group_id,
        group_label,
        -- a seed apart that a trial's row lacks (written before its kind: perturb_seed)
        -- is at its default, 0
        coalesce(columns(lambda c: seed_apart(c)), 0),
        started_at,
        without_seeds_apart(config_json) as group_config_json
    from trials
),

final as (
    select
        study,
        trial_id,
        group_id,
        first_value(group_label) over (
            partition by study, group_id order by started_at desc, trial_id desc
        ) as group_label,
        columns(lambda c: seed_apart(c)),
        count(*) over (partition by group_id) as trials_in_group,
        group_config_json
    from grouped
)

select *
from final;


-- trial_identity(seeds): each trial's identity in its group, one row per trial: study,
-- trial_id, its group and its seeds, those of the variable named `seeds`
-- (identity.sql): 'seeds_listed', the seeds that the outputs listing a trial show, or
-- 'seeds_apart', every seed its group's trials differ by. The views and questions that
-- show a trial take these columns from here, e.g. `trial_identity.* exclude (study,
-- trial_id)` after `inner join trial_identity('seeds_listed') as trial_identity`.

create or replace temp macro trial_identity(seeds) as table
select
    study,
    trial_id,
    group_id,
    group_label,
    columns(lambda c: list_contains(getvariable(seeds), c))
from groups;
