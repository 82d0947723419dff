-- reads: answer_ending, carry_error_rates, final_samples, wrong_place_numbers
-- one row per: group × test length × facet × bucket
-- parameters: `min_accuracy` (0.05)
-- What do the wrong answers look like (001 Fig. 9, F.10, F.11)? Per configuration
-- group and test length, at each finished trial's last sampled step. Positions and
-- counts are in answer places, not tokens: a place is one digit of the answer and,
-- with index hints, the hint written before it; places are numbered from the least
-- significant (0 = units), which is 001's written order (reversed format). Each
-- quantity is computed per trial and then averaged over the group's trials, as 001
-- averages its error distributions over runs (F.10). The `facet` column says which:
--
--   carry           001 Fig. 9, per place (errors_carry.sql): every answer place of
--                   every question, with a carry into it (carry_in > 0) or without.
--                   error_rate = mean over trials of (wrong places / places) of that
--                   kind; a place the model never wrote (its answer ended early) is wrong.
--   ending          how the wrong answers end: 'on time' (as long as the target),
--                   'premature end' (shorter: the model stopped early), 'late end'
--                   (longer, or every place right but no end).
--   error_position  001 F.10 left: where the wrong places are, over the wrong answers
--                   that end on time, every wrong place of each (not only the first);
--                   bucket_value = the place.
--   wrong_digits    001 F.10 right, F.11: how many places are wrong per wrong answer
--                   that ends on time; bucket_value = that number. Trials whose
--                   accuracy at the length is below `min_accuracy` are left out
--                   (001 F.11 leaves out "two near-zero accuracy runs").
--
-- share_of_errors = mean over the averaged trials of the trial's share (of its wrong
-- answers for ending and wrong_digits, of its wrong places for error_position); a
-- facet's shares add up to 1. n_trials: trials averaged (for the share facets, those
-- with something to share out); n_excluded: trials with wrong answers left out by
-- `min_accuracy`; count / total: the pooled counts behind a bucket and its facet.
-- Trials whose samples predate the per-place columns carry_in and wrong_places
-- (written before issue 17) only count in `ending`; coverage.sql lists them.
--
-- Parameters (DuckDB variables; `lg-study query --param name=value`):
--     min_accuracy  default 0.05   wrong_digits leaves out trials below it

with

params as (
    select coalesce(cast(getvariable('min_accuracy') as double), 0.05) as min_accuracy
),

answers as materialized (
    select
        group_id,
        group_label,
        study,
        trial_id,
        digits,
        in_distribution,
        idx,
        correct,
        carry_in,
        wrong_places,
        -- per-place strings as bit strings: count and intersect them without a row per
        -- place (carries above 1, from products, become 1 first)
        wrong_places::bit as wrong_bits,
        coalesce(
            try_cast(carry_in as bit),
            translate(carry_in, '23456789', '11111111')::bit
        ) as carry_bits,
        bit_count(wrong_places::bit) as n_wrong_places,
        answer_ending(correct, prediction, target, wrong_places, wrong_digits) as ending
    from final_samples
),

trial_accuracy as (
    select
        study,
        trial_id,
        digits,
        avg(correct::int) as accuracy
    from answers
    group by study, trial_id, digits
),

lengths as (
    select
        group_id,
        any_value(group_label) as group_label,
        digits,
        bool_and(in_distribution) as in_distribution
    from answers
    group by group_id, digits
),

-- carry (001 Fig. 9): errors_carry.sql
carry_facet as (
    select *
    from carry_error_rates(answers)
),

-- ending: each trial's wrong answers by how they end
ending_trials as (
    select
        group_id,
        study,
        trial_id,
        digits,
        ending as bucket,
        count(*) as count,
        sum(count(*)) over (partition by group_id, study, trial_id, digits) as total
    from answers
    where not correct
    group by group_id, study, trial_id, digits, ending
),

-- error_position (001 F.10 left): each trial's wrong places of on-time wrong answers
wrong_places as (
    select
        group_id,
        study,
        trial_id,
        digits,
        unnest(wrong_place_numbers(wrong_places)) as place
    from answers
    where ending = 'on time' and wrong_places is not null
),

position_trials as (
    select
        group_id,
        study,
        trial_id,
        digits,
        place as bucket_value,
        count(*) as count,
        sum(count(*)) over (partition by group_id, study, trial_id, digits) as total
    from wrong_places
    group by group_id, study, trial_id, digits, place
),

-- wrong_digits (001 F.10 right, F.11): wrong places per on-time wrong answer, by trial
count_trials as (
    select
        answers.group_id,
        answers.study,
        answers.trial_id,
        answers.digits,
        answers.n_wrong_places as bucket_value,
        trial_accuracy.accuracy < params.min_accuracy as excluded,
        count(*) as count,
        sum(count(*)) over (
            partition by answers.group_id, answers.study, answers.trial_id, answers.digits
        ) as total
    from answers
    inner join trial_accuracy using (study, trial_id, digits)
    cross join params
    where answers.ending = 'on time' and answers.wrong_places is not null
    group by
        answers.group_id,
        answers.study,
        answers.trial_id,
        answers.digits,
        answers.n_wrong_places,
        excluded
),

share_trials as (
    select
        group_id, study, trial_id, digits, 'ending' as facet, bucket,
        null::bigint as bucket_value, false as excluded, count, total
    from ending_trials
    union all
    select
        group_id, study, trial_id, digits, 'error_position', bucket_value::varchar,
        bucket_value, false, count, total
    from position_trials
    union all
    select
        group_id, study, trial_id, digits, 'wrong_digits', bucket_value::varchar,
        bucket_value, excluded, count, total
    from count_trials
),

-- how many trials each share facet averages (and leaves out)
share_counts as (
    select
        group_id,
        digits,
        facet,
        count(distinct (study, trial_id)) filter (where not excluded) as n_trials,
        count(distinct (study, trial_id)) filter (where excluded) as n_excluded,
        sum(count) filter (where not excluded)::bigint as total
    from share_trials
    group by group_id, digits, facet
),

share_facets as (
    select
        share_trials.group_id,
        share_trials.digits,
        share_trials.facet,
        share_trials.bucket,
        share_trials.bucket_value,
        any_value(share_counts.n_trials) as n_trials,
        any_value(share_counts.n_excluded) as n_excluded,
        sum(share_trials.count)::bigint as count,
        any_value(share_counts.total) as total,
        null::double as error_rate,
        -- a trial without this bucket adds 0: divide by all the trials averaged
        list_sum(list(share_trials.count / share_trials.total
            order by share_trials.count / share_trials.total)) / any_value(share_counts.n_trials)
            as share_of_errors
    from share_trials
    inner join share_counts using (group_id, digits, facet)
    where not share_trials.excluded
    group by share_trials.group_id, share_trials.digits, share_trials.facet,
        share_trials.bucket, share_trials.bucket_value
),

-- a facet whose every trial was left out still gets a row that says so
all_excluded as (
    select
        group_id,
        digits,
        facet,
        'every trial below min_accuracy' as bucket,
        null::bigint as bucket_value,
        n_trials,
        n_excluded
    from share_counts
    where n_trials = 0
),

facets as (
    select * from carry_facet
    union all by name
    select * from share_facets
    union all by name
    select * from all_excluded
),

final as (
    select
        facets.group_id,
        lengths.group_label,
        facets.digits,
        lengths.in_distribution,
        facets.facet,
        facets.bucket,
        facets.bucket_value,
        facets.n_trials,
        facets.n_excluded,
        facets.count,
        facets.total,
        facets.error_rate,
        facets.share_of_errors,
        params.min_accuracy
    from facets
    inner join lengths using (group_id, digits)
    cross join params
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
