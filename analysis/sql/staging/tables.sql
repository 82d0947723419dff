-- reads:
-- The results views `trials`, `train`, `eval` and `samples` over one study's Parquet
-- files, or over every study's. The other staging files derive views from them:
-- groups.sql (`finished_trials`, `groups`), reported_eval.sql (the evaluation each
-- trial reports, `final_eval`) and samples.sql (`finished_samples`, `final_samples`).
--
-- Set the root first, then run this file. In the DuckDB command-line client:
--
--     SET VARIABLE results_glob_root = 'results/quickstart';   -- one study
--     SET VARIABLE results_glob_root = 'results/*';            -- every study
--     .read analysis/sql/staging/empty_tables.sql
--     .read analysis/sql/staging/tables.sql
--
-- (docs/analysis.md lists the files the derived views need after it, in load order.)
--
-- read_parquet fails with "No files found" for a table that has no file yet (e.g.
-- samples before any trial finished); empty_tables.sql, read first, leaves an empty
-- typed view in its place. analysis/query.py does the same in Python.
--
-- The glob is expanded each time a view is read, so trials that finish later show up
-- (analysis/query.py lists the files once per connection instead).
-- Every view has a `study` column: the folder the file lies in (<root>/<study>/<table>/
-- trial_id=<id>/part-0.parquet), also for `trials`, whose files carry the name they
-- were written under (a study folder copied under a new name is a new study). The
-- same trial_id can be in two studies (the same config run twice, or copied), so
-- join the tables on (study, trial_id), never on trial_id alone: that would pair
-- each study's rows with the other's and multiply them.

-- One table's Parquet files (a glob, or a list of files: analysis/query.py lists the
-- files a reader reads, leaving out damaged ones), and the study folder a file lies in
-- (<root>/<study>/<table>/trial_id=<id>/<file>, or <root>/<study>/<table>/_compacted/
-- gen-<n>.parquet). Every file carries its trial_id column, so the folder names are
-- not read as hive partitions. hidden_rows (below) says which rows of the compacted
-- files a trial's own file replaces.

create or replace temp macro results_files(table_files) as table
select *
from read_parquet(
    table_files,
    hive_partitioning = false,
    union_by_name = true,
    filename = true
) as r
where not exists (
    select 1
    from hidden_rows as h
    where h.filename = r.filename and (h.trial_id is null or h.trial_id = r.trial_id)
);

create or replace temp macro study_folder(filename) as
    regexp_extract(filename, '([^/]+)/[^/]+/[^/]+/[^/]+$', 1);

-- hidden_rows (filename, trial_id): rows of compacted files that readers do not see
-- (orchestrator/store/compaction.py). A trial's rows of a table come from its own file
-- (trial_id=<id>/part-0.parquet) when it has one, else from the newest compacted file
-- of the table (the highest gen-<n>); older generations (trial_id null: the whole
-- file) are what a compaction still has to delete. This view works it out from the
-- files under the root; analysis/query.py, which lists the files itself, replaces it
-- with a table of the pairs.

create or replace temp view hidden_rows as
with

listed as (
    select
        file,
        study_folder(file) as study,
        regexp_extract(file, '([^/]+)/[^/]+/[^/]+$', 1) as table_name,
        regexp_extract(file, '/trial_id=([^/]+)/[^/]+$', 1) as trial_id,
        regexp_matches(file, '/_compacted/gen-[0-9]{6}[.]parquet$') as compacted
    -- a trial's own files and the compacted ones only: `*/*/*.parquet` also opened each
    -- of the 10,000 folders of _artifacts, at every query (5 s of status at 10,000 trials)
    from (
        select file from glob(getvariable('results_glob_root') || '/*/trial_id=*/*.parquet')
        union all
        select file from glob(getvariable('results_glob_root') || '/*/_compacted/*.parquet')
    )
),

newest as (
    select study, table_name, max(file) as file
    from listed
    where compacted
    group by study, table_name
)

select listed.file as filename, null::varchar as trial_id
from listed
anti join newest using (file)
where listed.compacted
union all
select newest.file as filename, listed.trial_id
from listed
inner join newest using (study, table_name)
where not listed.compacted;

-- An eval table's rows with their study. long_loss, first_digits and second_digits came
-- later (eval.select best_long_loss, eval.grid): files written before them lack the
-- columns, which then read as null.
create or replace temp macro eval_rows(table_files) as table
select
    study_folder(filename) as study,
    * exclude (filename)
from results_files(table_files)
union all by name
select
    null::double as long_loss,
    null::bigint as first_digits,
    null::bigint as second_digits
where false;

-- group_id and group_label came later (issue 13): analysis/query.py refuses files
-- written before them until `lg-study migrate` adds them (the empty relation below
-- types them for a study without trials). So did perturb_seed (null: no perturbation) and the provenance columns, among them
-- science_version and environment (null: written before lg-study recorded them); and
-- rows written by hand may lack the training range, which finished_samples reads.
create or replace temp view trials as
select * exclude (filename) replace (study_folder(filename) as study)
from results_files(getvariable('results_glob_root') || '/trials/**/*.parquet')
union all by name
select
    null::varchar as group_id,
    null::varchar as group_label,
    null::bigint as perturb_seed,
    null::bigint as science_version,
    null::varchar as environment,
    null::varchar as git_commit,
    null::boolean as git_dirty,
    null::bigint as train_min_digits,
    null::bigint as train_max_digits
where false;

create or replace temp view train as
select
    study_folder(filename) as study,
    * exclude (filename)
from results_files(getvariable('results_glob_root') || '/train/**/*.parquet');

-- The rows of eval.grid's cells (first_digits set) are grid_eval's, not eval's: every
-- file that reads eval means the lengths of eval.digits. (analysis/query.py points both
-- views at the same files.)
create or replace temp view eval as
select * exclude (first_digits, second_digits)
from eval_rows(getvariable('results_glob_root') || '/eval/**/*.parquet')
where first_digits is null;

create or replace temp view grid_eval as
select *
from eval_rows(getvariable('results_glob_root') || '/eval/**/*.parquet')
where first_digits is not null;

-- carry_in and wrong_places came later (issue 17): files written before them lack the
-- columns, which then read as null (the empty relation below adds them by name).
create or replace temp view samples as
select
    study_folder(filename) as study,
    * exclude (filename)
from results_files(getvariable('results_glob_root') || '/samples/**/*.parquet')
union all by name
select
    null::varchar as carry_in,
    null::varchar as wrong_places
where false;
