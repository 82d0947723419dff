-- reads: trials
-- one row per: status
-- parameters: none
-- How many trials of the study are in each status (done, failed, diverged, running,
-- pruned: stopped early by a search's pruner)?

with

final as (
    select
        status,
        count(*) as trials
    from trials
    group by status
)

select *
from final
order by status
