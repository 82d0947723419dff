-- reads:
-- A trial's identity in its configuration group, from the one list of seed kinds
-- (results_contract/identity.py, SEED_KINDS). analysis/query.py sets two DuckDB
-- variables from it on every connection: seeds_apart, the columns of the seeds a
-- group's trials differ by (today weight_seed, data_seed, perturb_seed), and
-- seeds_listed, those that the outputs listing a trial show beside its group (today
-- weight_seed, data_seed). The views and questions name these columns through the
-- macros below in a star expression, `columns(lambda c: seed_listed(c))`, never one by
-- one, so that a seed kind added to the list reaches every one of them. (The
-- statistics of a crossed design, variance.sql's and lucky_tickets.sql's, name
-- weight_seed and data_seed as their two factors: that is their science, not a list.)
-- In the DuckDB command-line client, set the variables as analysis/query.py does:
--
--     SET VARIABLE seeds_apart = ['weight_seed', 'data_seed', 'perturb_seed'];
--     SET VARIABLE seeds_listed = ['weight_seed', 'data_seed'];

create or replace macro seed_apart(column_name) as
    list_contains(getvariable('seeds_apart'), column_name);

create or replace macro seed_listed(column_name) as
    list_contains(getvariable('seeds_listed'), column_name);

-- A trial's config less its seeds apart (`groups`' group_config_json): json_merge_patch
-- drops the keys a patch sets to null, here {"seeds": {"weight": null, ...}}.
create or replace macro without_seeds_apart(config_json) as json_merge_patch(
    config_json,
    json_object('seeds', map_from_entries(list_transform(
        getvariable('seeds_apart'), lambda c: (regexp_replace(c, '_seed$', ''), null::json)
    )))
);
