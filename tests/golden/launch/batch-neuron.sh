#!/bin/bash
#SBATCH --job-name=pytorch_lightning
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gres=gpu:8
#SBATCH --cpus-per-task=4
#SBATCH --partition=amd_a100nv_8
#SBATCH --comment=field=ai;appl=pytorch
#SBATCH --time=24:00:00
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --no-requeue
# hvd-container: site neuron, runtime singularity
# controller lightning (asked for with --controller)

module load singularity/4.3.4

srun --kill-on-bad-exit=1 --job-name=pytorch_lightning -N 2 --ntasks-per-node=8 --cpus-per-task=4 singularity exec --nv /scratch/u/pl.sif python pt_bert_nsmc_lightning.py --num_nodes 2
