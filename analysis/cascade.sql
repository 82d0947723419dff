-- How does accuracy fall with the carry-cascade length of a question (003 Fig. 8a,
-- 8c)? Per configuration group, test length and cascade length: how many questions
-- were asked (pooled over the group's finished trials, at each trial's last sampled
-- step), how many were answered right, the accuracy and its Wilson 95 % interval, and
-- how common that cascade length is among the questions of that length.
--
-- cascade is the longest carry cascade of the question (003 §4, App. C.4; 0 = no
-- carry at all), as the samples table stores it. Rare cells (few questions) get wide
-- intervals. Wilson interval for k right out of n, z = 1.959964:
--     centre ± half = (p + z²/2n ± z · sqrt(p(1 − p)/n + z²/4n²)) / (1 + z²/n),  p = k/n
-- The trials of a group answer the same questions (the eval seed is fixed per study),
-- so pooled counts are not independent draws: the interval is a guide to how few
-- questions a cell has, not an exact one.
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
        samples.correct
    from samples
    inner join last_steps using (trial_id, step)
    inner join finished using (trial_id)
    inner join groups using (trial_id)
),

cells as (
    select
        group_id,
        group_label,
        digits,
        bool_and(in_distribution) as in_distribution,
        cascade,
        count(distinct trial_id) as n_trials,
        count(*) as questions,
        count(*) filter (where correct) as correct
    from answers
    group by group_id, group_label, digits, cascade
),

with_interval as (
    select
        cells.*,
        cells.correct / cells.questions as accuracy,
        cells.questions / sum(cells.questions) over (partition by cells.group_id, cells.digits)
            as share_of_questions,
        (cells.correct / cells.questions + z ^ 2 / (2 * cells.questions)) / (1 + z ^ 2 / cells.questions)
            as wilson_centre,
        z / (1 + z ^ 2 / cells.questions)
        * sqrt(
            (cells.correct / cells.questions) * (1 - cells.correct / cells.questions) / cells.questions
            + z ^ 2 / (4 * cells.questions ^ 2)
        ) as wilson_half
    from cells
    cross join (select 1.959963984540054::double as z) as normal
),

final as (
    select
        group_id,
        group_label,
        digits,
        in_distribution,
        cascade,
        n_trials,
        questions,
        correct,
        accuracy,
        greatest(wilson_centre - wilson_half, 0) as wilson95_low,  -- clamps round-off only
        least(wilson_centre + wilson_half, 1) as wilson95_high,
        share_of_questions
    from with_interval
)

select *
from final
order by group_label, group_id, digits, cascade
