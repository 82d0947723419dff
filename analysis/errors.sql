-- What do the wrong answers look like (001 Fig. 9, F.10–F.12)? Per configuration
-- group and test length, pooled over the group's finished trials at each trial's last
-- sampled step, the wrong answers counted three ways (the `facet` column):
--
--   carry         with carry (cascade > 0) vs without carry (cascade = 0), 001 Fig. 9;
--                 here `questions` is the number of questions of that kind and
--                 error_rate = wrong / questions, since carries are the more common kind
--   first_wrong   where the first wrong token is (F.10, F.12): bucket_value is its index
--                 in the answer as written (least significant digit first when the
--                 format is reversed)
--   wrong_digits  how many answer positions are wrong per wrong answer (F.11)
--
-- In first_wrong and wrong_digits, answers that end at the wrong place are counted
-- apart, in the buckets 'premature end' (prediction shorter than the target: the model
-- stopped early) and 'late end' (prediction longer than the target, or every digit
-- right but the end missing), with bucket_value null: their wrong positions are the
-- missing or extra tokens rather than wrong digits.
-- share_of_errors = wrong / all wrong answers of the group and length; each facet's
-- shares add up to 1.
-- No parameters.

with

finished as (
    select
        trial_id,
        train_min_digits,
        train_max_digits
    from trials
    where status in ('done', 'diverged')
),

last_steps as (
    select
        trial_id,
        max(step) as step
    from samples
    group by trial_id
),

answers as (
    select
        groups.group_id,
        groups.group_label,
        samples.trial_id,
        samples.digits,
        samples.digits between finished.train_min_digits and finished.train_max_digits
            as in_distribution,
        samples.cascade,
        samples.correct,
        samples.wrong_digits,
        samples.first_wrong,
        case
            when samples.correct then null
            when length(samples.prediction) < length(samples.target) then 'premature end'
            when length(samples.prediction) > length(samples.target) or samples.wrong_digits = 0
                then 'late end'
            else 'on time'
        end as ending
    from samples
    inner join last_steps using (trial_id, step)
    inner join finished using (trial_id)
    inner join groups using (trial_id)
),

by_carry as (
    select
        group_id,
        group_label,
        digits,
        bool_and(in_distribution) as in_distribution,
        'carry' as facet,
        case when cascade > 0 then 'with carry' else 'without carry' end as bucket,
        case when cascade > 0 then 1 else 0 end as bucket_value,
        count(distinct trial_id) as n_trials,
        count(*) as questions,
        count(*) filter (where not correct) as wrong
    from answers
    group by all
),

by_position as (
    select
        group_id,
        group_label,
        digits,
        bool_and(in_distribution) as in_distribution,
        'first_wrong' as facet,
        case when ending = 'on time' then first_wrong::varchar else ending end as bucket,
        case when ending = 'on time' then first_wrong end as bucket_value,
        count(distinct trial_id) as n_trials,
        null::bigint as questions,
        count(*) as wrong
    from answers
    where not correct
    group by all
),

by_count as (
    select
        group_id,
        group_label,
        digits,
        bool_and(in_distribution) as in_distribution,
        'wrong_digits' as facet,
        case when ending = 'on time' then wrong_digits::varchar else ending end as bucket,
        case when ending = 'on time' then wrong_digits end as bucket_value,
        count(distinct trial_id) as n_trials,
        null::bigint as questions,
        count(*) as wrong
    from answers
    where not correct
    group by all
),

wrong_totals as (
    select
        group_id,
        digits,
        count(*) filter (where not correct) as all_wrong
    from answers
    group by group_id, digits
),

facets as (
    select * from by_carry
    union all
    select * from by_position
    union all
    select * from by_count
),

final as (
    select
        facets.group_id,
        facets.group_label,
        facets.digits,
        facets.in_distribution,
        facets.facet,
        facets.bucket,
        facets.bucket_value,
        facets.n_trials,
        facets.questions,
        facets.wrong,
        facets.wrong / nullif(wrong_totals.all_wrong, 0) as share_of_errors,
        facets.wrong / facets.questions as error_rate
    from facets
    inner join wrong_totals using (group_id, digits)
)

select *
from final
order by
    group_label,
    group_id,
    digits,
    facet,
    bucket_value nulls last,
    bucket
