#!/bin/bash
#SBATCH --job-name=train
#SBATCH --nodes=1
#SBATCH --ntasks=6
#SBATCH --mincpus=6
# (--mincpus=6 with --ntasks: 6 ranks on each node, the site's form for GPU jobs in place of --ntasks-per-node)
#SBATCH --gres=gpu:6
#SBATCH --cpus-per-task=7
#SBATCH --mem=254000M
# (site zih-ml's default (scheduler.memory: 300M per CPU) gives the 6 ranks of a node 12600M, 2100M a rank, less than the 8192M a training rank needs: the node's share for 6 of its 6 GPUs (254000M))
#SBATCH --partition=ml
#SBATCH --time=08:00:00
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --no-requeue
# hvd-container: site zih-ml, runtime singularity
# controller mpi (the default: train.py is not readable here, so nothing tells; pass --controller (torch or torchrun for torch.distributed) if it is not written for Horovod)

srun --kill-on-bad-exit=1 -N 1 --ntasks-per-node=6 --cpus-per-task=7 singularity exec --nv hvd-ppc64le.sif python train.py
