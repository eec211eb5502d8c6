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
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_CROSS_NIC=1
export NCCL_PROTO='^LL128'
export FI_CXI_DEFAULT_CQ_SIZE=131072
export FI_CXI_DEFAULT_TX_SIZE=16384
export FI_CXI_DISABLE_HOST_REGISTER=1
export FI_CXI_RX_MATCH_MODE=software
export FI_MR_CACHE_MONITOR=userfaultfd
export NCCL_NET='AWS Libfabric'

# edf-6e40d66bd895a7a5.toml, read by the srun line below
(umask 077 && mkdir -p /home/u/job/.hvd-container && cat > /home/u/job/.hvd-container/edf-6e40d66bd895a7a5.toml) <<'HVD_FILE_END'
image = "/capstor/scratch/u/hvd.sqsh"
mounts = [
    "/home/u/job:/home/u/job",
]
workdir = "/home/u/job"

[env]
PMIX_MCA_psec = "^munge"
NCCL_NET_GDR_LEVEL = "PHB"
NCCL_CROSS_NIC = "1"
NCCL_PROTO = "^LL128"
FI_CXI_DEFAULT_CQ_SIZE = "131072"
FI_CXI_DEFAULT_TX_SIZE = "16384"
FI_CXI_DISABLE_HOST_REGISTER = "1"
FI_CXI_RX_MATCH_MODE = "software"
FI_MR_CACHE_MONITOR = "userfaultfd"
NCCL_NET = "AWS Libfabric"

[annotations.com.hooks.aws_ofi_nccl]
enabled = "true"
variant = "cuda-dl"
HVD_FILE_END

srun --mpi=pmix --kill-on-bad-exit=1 -N 2 --ntasks-per-node=4 --cpus-per-task=72 --environment=/home/u/job/.hvd-container/edf-6e40d66bd895a7a5.toml python train.py
