#!/bin/bash
#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks=16
#SBATCH --mincpus=8
# (--mincpus=8 with --ntasks: 8 ranks on each node, the site's form for GPU jobs in place of --ntasks-per-node)
#SBATCH --gres=gpu:8
#SBATCH --cpus-per-task=5
#SBATCH --mem=990000M
# (site zih-alpha's default (scheduler.memory: 300M per CPU) gives the 8 ranks of a node 12000M, 1500M a rank, less than the 8192M a training rank needs: the node's share for 8 of its 8 GPUs (990000M))
#SBATCH --partition=alpha
#SBATCH --time=08:00:00
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --no-requeue
# hvd-container: site zih-alpha, runtime singularity
# controller mpi (the default: train.py is not readable here, so nothing tells; pass --controller (torch or torchrun for torch.distributed) if it is not written for Horovod)

srun --kill-on-bad-exit=1 -N 2 -n 16 --cpus-per-task=5 singularity exec --nv hvd.sif python train.py
