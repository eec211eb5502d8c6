#!/bin/bash
#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks=8
#SBATCH --mincpus=4
# (--mincpus=4 with --ntasks: 4 ranks on each node, the site's form for GPU jobs in place of --ntasks-per-node)
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=14
#SBATCH --mem=768000M
# (site zih-capella's default (scheduler.memory: 300M per CPU) gives the 4 ranks of a node 16800M, 4200M a rank, less than the 8192M a training rank needs: the node's share for 4 of its 4 GPUs (768000M))
#SBATCH --partition=capella
#SBATCH --time=24:00:00
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --no-requeue
# hvd-container: site zih-capella, runtime apptainer
# controller mpi (the default: train.py is not readable here, so nothing tells; pass --controller (torch or torchrun for torch.distributed) if it is not written for Horovod)

srun --kill-on-bad-exit=1 -N 2 -n 8 --cpus-per-task=14 apptainer exec --nv hvd.sif python train.py
