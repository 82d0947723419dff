-- reads: seed_listed, trials
-- one row per: failed trial
-- parameters: none
-- Which trials failed or diverged, and why? (`lg-study status` prints this.)

with

final as (
    select
        trial_id,
        status,
        task,
        pe,
        columns(lambda c: seed_listed(c)),
        error
    from trials
    where status in ('failed', 'diverged')
)

select *
from final
order by trial_id
