-- The results views `trials`, `train`, `eval` and `samples` over one study's Parquet
-- files, or over every study's.
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
-- Over every study only `trials` has a study column: join the others on trial_id.
-- hive_types keeps trial_id text, which an all-digit hash would otherwise not be.

create or replace view trials as
select *
from read_parquet(
    getvariable('results_glob_root') || '/trials/**/*.parquet',
    hive_partitioning = true,
    hive_types = {'trial_id': varchar},
    union_by_name = true
);

create or replace view train as
select *
from read_parquet(
    getvariable('results_glob_root') || '/train/**/*.parquet',
    hive_partitioning = true,
    hive_types = {'trial_id': varchar},
    union_by_name = true
);

create or replace view eval as
select *
from read_parquet(
    getvariable('results_glob_root') || '/eval/**/*.parquet',
    hive_partitioning = true,
    hive_types = {'trial_id': varchar},
    union_by_name = true
);

create or replace view samples as
select *
from read_parquet(
    getvariable('results_glob_root') || '/samples/**/*.parquet',
    hive_partitioning = true,
    hive_types = {'trial_id': varchar},
    union_by_name = true
);
