"""A study as one Slurm batch job: the sbatch script `lg-study slurm` writes (one Ray
cluster over the allocation, `lg-study run` on its head, Ray stopped at the end), its
options checked at the edge, and its submission."""
