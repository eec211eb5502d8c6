"""The sbatch script of a planned launch and the shell words it is written in."""
