-- reads: analysis_reads, eval, finished_trials, samples, seed_listed, trial_identity, trials
-- one row per: finished trial × kind of rows it lacks
-- parameters: none
-- Which finished trials does each analysis file leave out, and why? The rule of every
-- file in analysis/: a trial counts when it finished (status done, or diverged: a
-- diverged trial keeps what it measured before its loss went non-finite, since
-- dropping it would flatter its group) and has the rows that the file reads. Failed
-- and unfinished trials count nowhere (failures.sql lists them; lucky_tickets.sql
-- names the cells they leave empty). One row per finished trial and kind of rows it
-- lacks:
--   accuracies         no eval rows (it diverged before its first evaluation)
--   samples            no per-question samples (they are recorded at the final
--                      evaluation, which a diverged trial never reaches)
--   per-place samples  samples written before carry_in and wrong_places existed
-- and the files that leave it out for that: the table analysis_reads, which lg-study
-- registers from the report's question records (analysis/questions.py), says which rows
-- each file reads, so a new question's file joins these lists with its record.
-- No parameters.

with

finished as (
    select
        trial_identity.* exclude (study, trial_id),
        trials.study,
        trials.trial_id,
        trials.status,
        trials.error
    from finished_trials as trials
    inner join trial_identity('seeds_listed') as trial_identity using (study, trial_id)
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

readers as (
    select
        missing,
        string_agg(
            file || case when still_counts = '' then '' else ' (' || still_counts || ')' end,
            ', ' order by file_order
        ) as left_out_of
    from analysis_reads
    group by missing
),

lacking as (
    select
        *,
        'accuracies' as missing,
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
        'samples written before the per-place columns carry_in and wrong_places'
    from gaps
    where has_samples and not has_places
),

missing as (
    select
        lacking.*,
        readers.left_out_of
    from lacking
    inner join readers using (missing)
),

final as (
    select
        group_id,
        group_label,
        study,
        trial_id,
        columns(lambda c: seed_listed(c)),
        status,
        missing,
        left_out_of,
        reason,
        error
    from missing
)

select *
from final
order by group_label, group_id, columns(lambda c: seed_listed(c)), trial_id, study, missing
