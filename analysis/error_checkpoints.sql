-- Where does each checkpoint go wrong (001 F.12)? errors.sql averages the error
-- positions over a group's trials (001 F.10); 001 F.12 shows them per checkpoint,
-- where single models err at particular places. One row per finished trial, sampled
-- step (a checkpoint), test length and answer place, for the checkpoints with wrong
-- answers that end on time:
--   wrong     how many of those answers are wrong at the place
--   share     wrong / all wrong places of the checkpoint at that length (adds up to 1)
--   accuracy  the checkpoint's exact match on the sampled questions of that length
-- Places as in errors.sql: one digit (and its index hint), numbered from the least
-- significant, 0 = units. Samples written before the per-place columns have no rows.
-- No parameters.

with

finished as (
    select
        study,
        trial_id,
        train_min_digits,
        train_max_digits
    from trials
    where status in ('done', 'diverged')
),

answers as (
    select
        groups.group_id,
        groups.group_label,
        groups.weight_seed,
        groups.data_seed,
        samples.study,
        samples.trial_id,
        samples.step,
        samples.digits,
        samples.digits between finished.train_min_digits and finished.train_max_digits
            as in_distribution,
        samples.correct,
        samples.wrong_places,
        not samples.correct
        and length(samples.prediction) = length(samples.target)
        and samples.wrong_places like '%1%' as wrong_on_time,
        avg(samples.correct::int) over (
            partition by samples.study, samples.trial_id, samples.step, samples.digits
        ) as accuracy
    from samples
    inner join finished using (study, trial_id)
    inner join groups using (study, trial_id)
    where samples.wrong_places is not null
),

places as (
    select
        *,
        unnest(range(length(wrong_places))) as place
    from answers
    where wrong_on_time
),

per_place as (
    select
        group_id,
        any_value(group_label) as group_label,
        any_value(weight_seed) as weight_seed,
        any_value(data_seed) as data_seed,
        study,
        trial_id,
        step,
        digits,
        bool_and(in_distribution) as in_distribution,
        place,
        count(*) filter (where substr(wrong_places, place + 1, 1) = '1') as wrong,
        count(*) as wrong_answers,
        any_value(accuracy) as accuracy
    from places
    group by group_id, study, trial_id, step, digits, place
),

final as (
    select
        group_id,
        group_label,
        study,
        trial_id,
        weight_seed,
        data_seed,
        step,
        digits,
        in_distribution,
        place,
        wrong,
        wrong / sum(wrong) over (partition by study, trial_id, step, digits) as share,
        wrong_answers,
        accuracy
    from per_place
)

select *
from final
order by group_label, group_id, weight_seed, data_seed, trial_id, study, step, digits, place
