-- reads:
-- Are answer places with a carry into them wrong more often than those without (001
-- Fig. 9)? The table macro carry_error_rates(answers_table), defined on every
-- connection (analysis.query.prepare_connection), for errors.sql's `carry` facet: over
-- the sampled answers of answers_table (group_id, study, trial_id, digits, wrong_places;
-- wrong_bits and carry_bits, the per-place strings as bit strings, carries above 1
-- written as 1; n_wrong_places), per group, test length and bucket ('with carry',
-- 'without carry'): the trials averaged, the pooled wrong places (count) of all places
-- (total) of that kind, and error_rate, the mean over trials of each trial's wrong
-- places / places of that kind. A place the model never wrote (its answer ended early)
-- is wrong. Answers without the per-place columns (written before issue 17) count not.

create or replace macro carry_error_rates(answers_table) as table
with

-- carry (001 Fig. 9): each trial's places with and without a carry into them, and
-- how many of each are wrong
carry_counts as (
    select
        group_id,
        study,
        trial_id,
        digits,
        sum(bit_count(carry_bits)) as carried,
        sum(bit_count(wrong_bits & carry_bits)) as wrong_carried,
        sum(length(wrong_places)) as places,
        sum(n_wrong_places) as wrong
    from query_table(answers_table)
    where carry_bits is not null and wrong_bits is not null
    group by group_id, study, trial_id, digits
),

carry_trials as (
    select
        group_id,
        study,
        trial_id,
        digits,
        'with carry' as bucket,
        1 as bucket_value,
        carried as places,
        wrong_carried as wrong
    from carry_counts
    where carried > 0
    union all
    select
        group_id,
        study,
        trial_id,
        digits,
        'without carry',
        0,
        places - carried,
        wrong - wrong_carried
    from carry_counts
    where places > carried
),

final as (
    select
        group_id,
        digits,
        'carry' as facet,
        bucket,
        bucket_value,
        count(*) as n_trials,
        0 as n_excluded,
        sum(wrong)::bigint as count,
        sum(places)::bigint as total,
        -- added smallest first: the same trials give the same bits in any row order
        list_avg(list(wrong / places order by wrong / places)) as error_rate,
        null::double as share_of_errors
    from carry_trials
    group by group_id, digits, bucket, bucket_value
)

select *
from final;
