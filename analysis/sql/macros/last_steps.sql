-- reads:
-- last_steps(rows_table): each trial's last step in a table of rows with study,
-- trial_id and step (eval, grid_eval, samples): the step a trial's final rows are at.
-- The views of final_eval, last_eval and final_samples and the question grid.sql join
-- their rows to it.

create or replace macro last_steps(rows_table) as table
select
    study,
    trial_id,
    max(step) as step
from query_table(rows_table)
group by study, trial_id;
