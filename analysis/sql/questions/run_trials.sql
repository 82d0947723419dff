-- reads: seed_apart, trial_identity
-- one row per: trial
-- parameters: `trial_ids` (every trial)
-- Which trials does the table `lg-study run` and `lg-study status` print cover, in which
-- configuration group, with which seeds and training range? One row per trial (any
-- status): its group (view `groups`), its weight, data and perturb seeds, and
-- task.train_digits as train_low, train_high (a test length's ratio is taken against
-- train_high). orchestrator.console.run_table lays the table out by these rows and reads the
-- accuracies from run_table.sql.
--
-- The connection keeps only these trials: the views trials and eval become tables of
-- their rows (read once), so that the views over them (finished_trials, groups,
-- final_eval, the staging files' own definitions) and every analysis file run next on the
-- same connection, variance.sql and success.sql among them, see the listed trials
-- alone: a trial of another design in the same results folder never mixes in.
--
-- Parameters (DuckDB variables):
--     trial_ids  default: every trial  the trial ids, separated by commas

create or replace temp table listed_trials as
with

listed as (
    select unnest(string_split(getvariable('trial_ids'), ',')) as trial_id
),

final as (
    select *
    from trials
    where getvariable('trial_ids') is null
        or trial_id in (select listed.trial_id from listed)
)

select *
from final;

create or replace temp table listed_eval as
select eval.*
from eval
inner join listed_trials using (study, trial_id);

create or replace temp view trials as
select *
from listed_trials;

create or replace temp view eval as
select *
from listed_eval;

with

final as (
    select
        trials.trial_id,
        trials.status,
        apart.* exclude (study, trial_id),
        cast(trials.config_json -> '$.task.train_digits' ->> 0 as integer) as train_low,
        cast(trials.config_json -> '$.task.train_digits' ->> 1 as integer) as train_high
    from trials
    inner join trial_identity('seeds_apart') as apart using (study, trial_id)
)

select *
from final
order by group_label, group_id, columns(lambda c: seed_apart(c)), trial_id
