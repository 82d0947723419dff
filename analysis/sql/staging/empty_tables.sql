-- reads:
-- Empty, typed stand-ins for the views in tables.sql, for a table that has no Parquet
-- file yet. The columns mirror the schemas in orchestrator/store/results_store.py (a test
-- checks that they agree), after the `study` column the views add. `trials` also
-- carries the key settings (docs/design.md, "Tables and columns") and the training
-- range, so the analysis files bind on a study with no finished trial.

create or replace temp view trials as
select
    null::varchar as study,
    null::varchar as trial_id,
    null::varchar as status,
    null::varchar as config_json,
    null::bigint as n_params,
    null::varchar as device,
    null::timestamptz as started_at,
    null::timestamptz as finished_at,
    null::double as wall_s,
    null::varchar as error,
    null::varchar as task,
    null::varchar as arch,
    null::varchar as pe,
    null::varchar as size,
    null::varchar as distribution,
    null::bigint as weight_seed,
    null::bigint as data_seed,
    null::bigint as eval_seed,
    null::bigint as perturb_seed,
    null::double as lr,
    null::bigint as train_min_digits,
    null::bigint as train_max_digits,
    null::varchar as node,
    null::varchar as host,
    null::bigint as pid,
    null::bigint as resumed_from_step,
    null::bigint as diverged_at,
    null::double as last_finite_loss,
    null::varchar as environment,
    null::bigint as science_version,
    null::varchar as git_commit,
    null::boolean as git_dirty,
    null::varchar as group_id,
    null::varchar as group_label
where false;

create or replace temp view train as
select
    null::varchar as study,
    null::varchar as trial_id,
    null::bigint as step,
    null::double as loss,
    null::double as lr,
    null::bigint as tokens,
    null::double as wall_s
where false;

create or replace temp view eval as
select
    null::varchar as study,
    null::varchar as trial_id,
    null::bigint as step,
    null::bigint as digits,
    null::bigint as n,
    null::bigint as correct,
    null::double as accuracy,
    null::boolean as in_distribution,
    null::double as long_loss
where false;

-- (eval, above, with the two columns of a grid cell)
create or replace temp view grid_eval as
select
    *,
    null::bigint as first_digits,
    null::bigint as second_digits
from eval;

create or replace temp view samples as
select
    null::varchar as study,
    null::varchar as trial_id,
    null::bigint as step,
    null::bigint as digits,
    null::bigint as idx,
    null::bigint as cascade,
    null::boolean as correct,
    null::bigint as wrong_digits,
    null::bigint as first_wrong,
    null::varchar as target,
    null::varchar as prediction,
    null::varchar as carry_in,
    null::varchar as wrong_places
where false;
