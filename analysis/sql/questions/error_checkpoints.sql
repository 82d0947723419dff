-- reads: answer_ending, finished_samples, seed_listed, wrong_place_numbers
-- one row per: trial × sampled step × test length × answer place
-- parameters: none
-- Where does each checkpoint go wrong (001 F.12)? errors.sql averages the error
-- positions over a group's trials (001 F.10); 001 F.12 shows them per checkpoint,
-- where single models err at particular places. One row per finished trial, sampled
-- step (a checkpoint), test length and answer place, for the checkpoints with wrong
-- answers that end on time:
--   wrong     how many of those answers are wrong at the place (0 included)
--   share     wrong / all wrong places of the checkpoint at that length (adds up to 1)
--   accuracy  the checkpoint's exact match on the sampled questions of that length
-- Places as in errors.sql: one digit (and its index hint), numbered from the least
-- significant, 0 = units. Samples written before the per-place columns have no rows.
-- No parameters.

with

answers as materialized (
    select
        group_id,
        group_label,
        columns(lambda c: seed_listed(c)),
        study,
        trial_id,
        step,
        digits,
        in_distribution,
        correct,
        wrong_places,
        answer_ending(correct, prediction, target, wrong_places, wrong_digits) = 'on time'
            as wrong_on_time
    from finished_samples
    where wrong_places is not null
),

checkpoints as (
    select
        group_id,
        any_value(group_label) as group_label,
        any_value(columns(lambda c: seed_listed(c))),
        study,
        trial_id,
        step,
        digits,
        bool_and(in_distribution) as in_distribution,
        avg(correct::int) as accuracy,
        max(length(wrong_places)) filter (where wrong_on_time) as places
    from answers
    group by group_id, study, trial_id, step, digits
    having count(*) filter (where wrong_on_time) > 0
),

wrong_place_rows as (
    select
        study,
        trial_id,
        step,
        digits,
        unnest(wrong_place_numbers(wrong_places)) as place
    from answers
    where wrong_on_time
),

wrong_counts as (
    select
        study,
        trial_id,
        step,
        digits,
        place,
        count(*) as wrong
    from wrong_place_rows
    group by study, trial_id, step, digits, place
),

-- every place of every checkpoint, so a place without errors reads 0
per_place as (
    select
        checkpoints.*,
        unnest(range(checkpoints.places)) as place
    from checkpoints
),

final as (
    select
        per_place.group_id,
        per_place.group_label,
        per_place.study,
        per_place.trial_id,
        columns(lambda c: seed_listed(c)),  -- per_place's: wrong_counts has no seeds
        per_place.step,
        per_place.digits,
        per_place.in_distribution,
        per_place.place,
        coalesce(wrong_counts.wrong, 0) as wrong,
        coalesce(wrong_counts.wrong, 0) / sum(coalesce(wrong_counts.wrong, 0)) over (
            partition by per_place.study, per_place.trial_id, per_place.step, per_place.digits
        ) as share,
        per_place.accuracy
    from per_place
    left join wrong_counts using (study, trial_id, step, digits, place)
)

select *
from final
order by group_label, group_id, columns(lambda c: seed_listed(c)), trial_id, study, step, digits, place
