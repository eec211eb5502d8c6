#!/bin/bash
#SBATCH --job-name=tf_keras_fashion_mnist
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH --account=dasrepo_g
#SBATCH --qos=regular
#SBATCH --constraint=gpu
#SBATCH --time=2:00:00
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --no-requeue
#SBATCH --image=docker:u/hvd:tf2.10
#SBATCH --module=gpu,nccl-plugin,mpich
# hvd-container: site perlmutter, runtime shifter
# controller mpi (the default: tf_keras_fashion_mnist.py is not readable here, so nothing tells; pass --controller (torch or torchrun for torch.distributed) if it is not written for Horovod)

export SLURM_CPU_BIND=cores
export NCCL_SOCKET_IFNAME=hsn
export NCCL_CROSS_NIC=1
export NCCL_NET_GDR_LEVEL=PHB
export FI_CXI_DISABLE_HOST_REGISTER=1
export FI_MR_CACHE_MONITOR=userfaultfd

srun --mpi=pmi2 --kill-on-bad-exit=1 -N 2 --ntasks-per-node=4 --cpus-per-task=32 shifter --module=gpu,nccl-plugin,mpich --image=docker:u/hvd:tf2.10 python tf_keras_fashion_mnist.py
