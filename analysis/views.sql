-- The results views `trials`, `train`, `eval` and `samples` over one study's Parquet
-- files, or over every study's, and the derived views `groups` (configuration groups:
-- trials that differ only by their seeds) and `final_eval` (defined at the end).
--
-- Set the root first, then run this file. In the DuckDB command-line client:
--
--     SET VARIABLE results_glob_root = 'results/quickstart';   -- one study
--     SET VARIABLE results_glob_root = 'results/*';            -- every study
--     .read analysis/empty_tables.sql
--     .read analysis/views.sql
--
-- read_parquet fails with "No files found" for a table that has no file yet (e.g.
-- samples before any trial finished); empty_tables.sql, read first, leaves an empty
-- typed view in its place. analysis/query.py does the same in Python.
--
-- The glob is expanded each time a view is read, so trials that finish later show up.
-- Every view has a `study` column: the folder the file lies in (<root>/<study>/<table>/
-- trial_id=<id>/part-0.parquet), also for `trials`, whose files carry the name they
-- were written under (a study folder copied under a new name is a new study). The
-- same trial_id can be in two studies (the same config run twice, or copied), so
-- join the tables on (study, trial_id), never on trial_id alone: that would pair
-- each study's rows with the other's and multiply them.
-- hive_types keeps trial_id text, which an all-digit hash would otherwise not be.

create or replace view trials as
select * exclude (filename) replace (
    regexp_extract(filename, '([^/]+)/trials/[^/]+/[^/]+$', 1) as study
)
from read_parquet(
    getvariable('results_glob_root') || '/trials/**/*.parquet',
    hive_partitioning = true,
    hive_types = {'trial_id': varchar},
    union_by_name = true,
    filename = true
);

create or replace view train as
select
    regexp_extract(filename, '([^/]+)/train/[^/]+/[^/]+$', 1) as study,
    * exclude (filename)
from read_parquet(
    getvariable('results_glob_root') || '/train/**/*.parquet',
    hive_partitioning = true,
    hive_types = {'trial_id': varchar},
    union_by_name = true,
    filename = true
);

create or replace view eval as
select
    regexp_extract(filename, '([^/]+)/eval/[^/]+/[^/]+$', 1) as study,
    * exclude (filename)
from read_parquet(
    getvariable('results_glob_root') || '/eval/**/*.parquet',
    hive_partitioning = true,
    hive_types = {'trial_id': varchar},
    union_by_name = true,
    filename = true
);

-- carry_in and wrong_places came later (issue 17): files written before them lack the
-- columns, which then read as null (the empty relation below adds them by name).
create or replace view samples as
select
    regexp_extract(filename, '([^/]+)/samples/[^/]+/[^/]+$', 1) as study,
    * exclude (filename)
from read_parquet(
    getvariable('results_glob_root') || '/samples/**/*.parquet',
    hive_partitioning = true,
    hive_types = {'trial_id': varchar},
    union_by_name = true,
    filename = true
)
union all by name
select
    null::varchar as carry_in,
    null::varchar as wrong_places
where false;

-- `groups`: which configuration group is each trial in? A group is the set of trials
-- whose resolved configs are equal except for the weight and the data seed (the eval
-- seed is fixed per study and stays in the key). One row per trial.
--
-- group_id is the first 12 hex digits of sha256 of the config_json text with its
-- "seeds" object cut down to {"eval": E}: the same text analysis/groups.py builds in
-- Python for the MLflow tag `group`, so the two ids agree. (The JSON is edited as
-- text, not parsed and re-written, because DuckDB writes numbers differently from
-- Python, e.g. 0.00001 for 1e-05.)
--
-- group_label reads task/pe/size/distribution, followed by the settings that tell
-- apart groups sharing those four, e.g. "addition/rope/tiny/uniform_length train.lr=0.001".

create or replace view groups as
with

seedless as (
    select
        study,
        trial_id,
        weight_seed,
        data_seed,
        concat_ws(
            '/',
            config_json ->> '$.task.name',
            config_json ->> '$.model.pe',
            config_json ->> '$.model.size',
            config_json ->> '$.data.distribution'
        ) as base_label,
        regexp_replace(
            config_json,
            '"seeds":\{[^{}]*\}',
            '"seeds":{' || coalesce('"eval":' || json_extract(config_json, '$.seeds.eval'), '') || '}'
        ) as group_config_json
    from trials
),

keyed as (
    select
        *,
        left(sha256(group_config_json), 12) as group_id
    from seedless
),

distinct_groups as (
    select distinct
        group_id,
        base_label,
        group_config_json
    from keyed
),

-- every setting of every group: leaves and whole lists, as "section.key" = value
settings as (
    select
        distinct_groups.group_id,
        distinct_groups.base_label,
        substr(setting.fullkey, 3) as setting,
        setting.value ->> '$' as value
    from distinct_groups, json_tree(distinct_groups.group_config_json) as setting
    where setting.type <> 'OBJECT' and setting.fullkey not like '%[%'
),

groups_per_label as (
    select
        base_label,
        count(*) as n_groups
    from distinct_groups
    group by base_label
),

-- settings that differ (or are missing) between groups that share a base label
differing as (
    select
        settings.base_label,
        settings.setting
    from settings
    inner join groups_per_label using (base_label)
    group by settings.base_label, settings.setting, groups_per_label.n_groups
    having count(distinct settings.value) > 1 or count(distinct settings.group_id) < groups_per_label.n_groups
),

suffixes as (
    select
        settings.group_id,
        string_agg(settings.setting || '=' || settings.value, ' ' order by settings.setting) as suffix
    from settings
    inner join differing using (base_label, setting)
    group by settings.group_id
),

final as (
    select
        keyed.study,
        keyed.trial_id,
        keyed.group_id,
        keyed.base_label || coalesce(' ' || suffixes.suffix, '') as group_label,
        keyed.weight_seed,
        keyed.data_seed,
        count(*) over (partition by keyed.group_id) as trials_in_group,
        keyed.group_config_json
    from keyed
    left join suffixes using (group_id)
)

select *
from final;


-- final_eval: each trial's evaluation rows at its last evaluated step, the rows that
-- variance, lucky_tickets, final_accuracy and summary compare across trials. An
-- accuracy of NaN (a length with no question) reads as null: DuckDB sorts NaN above
-- every number, so it would otherwise win a maximum or pass any threshold. (The test
-- is `not isfinite`: DuckDB 2.0 folds isnan() on a Parquet column to false from the
-- file's statistics, which leave NaN out.)

create or replace view final_eval as
with

final_steps as (
    select
        study,
        trial_id,
        max(step) as step
    from eval
    group by study, trial_id
),

final as (
    select eval.* replace (
        case when isfinite(eval.accuracy) then eval.accuracy end as accuracy
    )
    from eval
    inner join final_steps using (study, trial_id, step)
)

select * from final;
