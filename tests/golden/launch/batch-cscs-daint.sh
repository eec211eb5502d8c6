#!/bin/bash
#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=72
#SBATCH --partition=debug
#SBATCH --account=a
#SBATCH --time=0:30:00
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --no-requeue
# hvd-container: site cscs-daint, runtime container-engine
# controller mpi (the default: train.py is not readable here, so nothing tells; pass --controller (torch or torchrun for torch.distributed) if it is not written for Horovod)

export PMIX_MCA_psec='^munge'

# edf-62d33597145b69f6.toml, read by the srun line
(umask 077 && mkdir -p /home/u/job/.hvd-container && cat > /home/u/job/.hvd-container/edf-62d33597145b69f6.toml) <<'HVD_FILE_END'
image = "/capstor/scratch/u/hvd.sqsh"
mounts = [
    "/home/u/job:/home/u/job",
]
workdir = "/home/u/job"

[env]
PMIX_MCA_psec = "^munge"

[annotations.com.hooks.aws_ofi_nccl]
enabled = "true"
variant = "cuda-dl"
HVD_FILE_END

srun --mpi=pmix --kill-on-bad-exit=1 -N 2 --ntasks-per-node=4 --cpus-per-task=72 --environment=/home/u/job/.hvd-container/edf-62d33597145b69f6.toml python train.py
