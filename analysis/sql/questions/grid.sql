-- reads: finished_trials, grid_eval, groups, last_steps
-- one row per: group × cell
-- parameters: none
-- How accurate is each configuration group on every pair of operand lengths? The
-- questions of eval.grid (McLeish et al. 2024, Fig. 1: accuracy over the grid of the
-- first operand's length by the second's), scored at each trial's final evaluation.
-- One row per group and cell: the mean over the group's finished trials of their exact
-- match, its smallest and largest, the trials and the questions behind it. A group
-- without eval.grid has no rows. Means add in a fixed order (list_avg of a sorted list),
-- so the same rows give the same bits whatever order the files are read in.
-- No parameters.

with

cells as (
    select
        groups.group_id,
        groups.group_label,
        grid_eval.first_digits,
        grid_eval.second_digits,
        grid_eval.in_distribution,
        grid_eval.n,
        case when isfinite(grid_eval.accuracy) then grid_eval.accuracy end as accuracy
    from grid_eval
    inner join last_steps('grid_eval') using (study, trial_id, step)
    inner join finished_trials using (study, trial_id)
    inner join groups using (study, trial_id)
),

final as (
    select
        group_id,
        group_label,
        first_digits,
        second_digits,
        bool_and(in_distribution) as in_distribution,
        count(accuracy) as n_trials,
        sum(n) as questions,
        list_avg(list(accuracy order by accuracy)) as mean_accuracy,
        min(accuracy) as min_accuracy,
        max(accuracy) as max_accuracy
    from cells
    group by group_id, group_label, first_digits, second_digits
)

select *
from final
order by group_label, group_id, first_digits, second_digits
