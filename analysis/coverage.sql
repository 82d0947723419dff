-- Which finished trials does each analysis file leave out, and why? The rule of every
-- file in analysis/: a trial counts when it finished (status done, or diverged: a
-- diverged trial keeps what it measured before its loss went non-finite, since
-- dropping it would flatter its group) and has the rows that the file reads. Failed
-- and unfinished trials count nowhere (failures.sql lists them; lucky_tickets.sql
-- names the cells they leave empty). One row per finished trial and kind of rows it
-- lacks:
--   accuracies         no eval rows (it diverged before its first evaluation): out of
--                      variance, final_accuracy, training and lucky_tickets
--   samples            no per-question samples (they are recorded at the final
--                      evaluation, which a diverged trial never reaches): out of
--                      cascade, errors and error_checkpoints
--   per-place samples  samples written before carry_in and wrong_places existed: out
--                      of errors (but for its `ending` facet) and error_checkpoints
-- No parameters.

with

finished as (
    select
        groups.group_id,
        groups.group_label,
        groups.weight_seed,
        groups.data_seed,
        trials.study,
        trials.trial_id,
        trials.status,
        trials.error
    from finished_trials as trials
    inner join groups using (study, trial_id)
),

evaluated as (
    select distinct
        study,
        trial_id
    from eval
),

sampled as (
    select
        study,
        trial_id,
        count(wrong_places) > 0 as per_place
    from samples
    group by study, trial_id
),

gaps as (
    select
        finished.*,
        evaluated.trial_id is not null as has_accuracies,
        sampled.trial_id is not null as has_samples,
        coalesce(sampled.per_place, false) as has_places
    from finished
    left join evaluated using (study, trial_id)
    left join sampled using (study, trial_id)
),

missing as (
    select
        *,
        'accuracies' as missing,
        'variance, final_accuracy, training, lucky_tickets' as left_out_of,
        case
            when status = 'diverged' then 'diverged before its first evaluation'
            else 'no evaluation rows'
        end as reason
    from gaps
    where not has_accuracies
    union all
    select
        *,
        'samples',
        'cascade, errors, error_checkpoints',
        case
            when status = 'diverged' then 'diverged: samples come from the final evaluation'
            else 'no samples rows'
        end
    from gaps
    where not has_samples
    union all
    select
        *,
        'per-place samples',
        'errors (but its ending facet), error_checkpoints',
        'samples written before the per-place columns carry_in and wrong_places'
    from gaps
    where has_samples and not has_places
),

final as (
    select
        group_id,
        group_label,
        study,
        trial_id,
        weight_seed,
        data_seed,
        status,
        missing,
        left_out_of,
        reason,
        error
    from missing
)

select *
from final
order by group_label, group_id, weight_seed, data_seed, trial_id, study, missing
