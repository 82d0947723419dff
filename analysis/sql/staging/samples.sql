-- reads: finished_trials, last_steps, samples, trial_identity
-- finished_samples: the samples rows of the finished trials, with each trial's group
-- and seeds and whether the length lies inside its training range (error_checkpoints
-- reads every sampled step); final_samples: those at each trial's last sampled step
-- (cascade, errors).

create or replace temp view finished_samples as
select
    trial_identity.* exclude (study, trial_id),
    samples.*,
    samples.digits between finished_trials.train_min_digits and finished_trials.train_max_digits
        as in_distribution
from samples
inner join finished_trials using (study, trial_id)
inner join trial_identity('seeds_listed') as trial_identity using (study, trial_id);

create or replace temp view final_samples as
with

final as (
    select finished_samples.*
    from finished_samples
    inner join last_steps('samples') using (study, trial_id, step)
)

select * from final;
