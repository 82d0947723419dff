-- reads:
-- Which pairs of configuration groups are there, and in which settings do they differ?
-- The table macro group_pairs(groups_table), defined on every connection
-- (analysis.query.prepare_connection), for compare.sql: over the view `groups` (or a
-- table of its columns group_id, group_label, group_config_json), one row per pair of groups
-- (group_a, group_b; a is the pair's first group by label) with their labels and
-- differs_in, every setting whose value differs, e.g. "model.pe: fire | rope", read
-- from the groups' configs less their weight, data and perturb seeds
-- (groups.group_config_json; a setting one group lacks reads "(none)").

create or replace macro group_pairs(groups_table) as table
with

group_configs as (
    select distinct
        group_id,
        group_label,
        group_config_json
    from query_table(groups_table)
),

-- every setting of every group: leaves and whole lists, as "section.key" = value
settings as (
    select
        group_configs.group_id,
        substr(setting.fullkey, 3) as setting,
        setting.value ->> '$' as value
    from group_configs, json_tree(group_configs.group_config_json) as setting
    where setting.type <> 'OBJECT' and setting.fullkey not like '%[%'
),

pairs as (
    select
        a.group_id as group_a,
        b.group_id as group_b,
        a.group_label as label_a,
        b.group_label as label_b
    from group_configs as a
    inner join group_configs as b
        on a.group_label < b.group_label
        or (a.group_label = b.group_label and a.group_id < b.group_id)
),

pair_settings as (
    select distinct
        pairs.group_a,
        pairs.group_b,
        settings.setting
    from pairs
    inner join settings on settings.group_id in (pairs.group_a, pairs.group_b)
),

differences as (
    select
        pair_settings.group_a,
        pair_settings.group_b,
        list(
            pair_settings.setting || ': ' || coalesce(a.value, '(none)') || ' | '
            || coalesce(b.value, '(none)')
            order by pair_settings.setting
        ) as differs_in
    from pair_settings
    left join settings as a
        on a.group_id = pair_settings.group_a and a.setting = pair_settings.setting
    left join settings as b
        on b.group_id = pair_settings.group_b and b.setting = pair_settings.setting
    where a.value is distinct from b.value
    group by pair_settings.group_a, pair_settings.group_b
),

final as (
    select
        pairs.*,
        differences.differs_in
    from pairs
    inner join differences using (group_a, group_b)
)

select *
from final;
