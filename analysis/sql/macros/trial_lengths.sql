-- reads:
-- A trial's values over the test lengths its group measured, as table macros: its y at
-- each length and over all of them, and the lengths it lacks. Defined on every
-- connection (analysis.query.prepare_connection).

-- A trial's y at each of its rows' lengths (at_digits = digits) and over all of them
-- (at_digits 0; null when the trial lacks one of its group's lengths), from rows of
-- group_id, study, trial_id, digits, accuracy. The mean adds in a fixed order (an
-- ordered list), so row order never moves a bit (lucky_tickets.sql, one_way_pilots.sql).

create or replace macro trial_length_values(rows) as table
    with group_lengths as (
        select group_id, count(distinct digits) as n_lengths
        from query_table(rows)
        group by group_id
    )

    select group_id, study, trial_id, digits as at_digits, accuracy as y
    from query_table(rows)
    union all
    select
        measured.group_id,
        measured.study,
        measured.trial_id,
        0 as at_digits,
        case
            when count(measured.accuracy) = any_value(group_lengths.n_lengths)
                then list_avg(list(measured.accuracy order by measured.digits))
        end as y
    from query_table(rows) as measured
    inner join group_lengths using (group_id)
    group by measured.group_id, measured.study, measured.trial_id;

-- For each trial of `rows` (group_id, study, trial_id, digits, accuracy: the lengths a
-- question measures) that lacks an accuracy at one of the lengths its group measured:
-- the lengths it lacks (`missing`). A mean over lengths without them would be a mean
-- over fewer (replicates.sql).
create or replace macro missing_lengths(rows) as table
    with group_lengths as (
        select group_id, list(distinct digits order by digits) as lengths
        from query_table(rows)
        group by group_id
    )

    select
        measured.group_id,
        measured.study,
        measured.trial_id,
        list_filter(
            any_value(group_lengths.lengths),
            lambda n: not list_contains(
                coalesce(list(measured.digits) filter (where measured.accuracy is not null), []), n)
        ) as missing
    from query_table(rows) as measured
    inner join group_lengths using (group_id)
    group by measured.group_id, measured.study, measured.trial_id
    having len(missing) > 0;
