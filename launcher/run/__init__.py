"""What runs a planned launch: the commands' flows, srun/sbatch/salloc, and a long run's return."""
