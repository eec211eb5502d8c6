#!/bin/bash
#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --no-requeue
# hvd-container: site local, runtime charliecloud
# controller mpi (the default: train.py is not readable here, so nothing tells; pass --controller (torch or torchrun for torch.distributed) if it is not written for Horovod)

export PMIX_MCA_gds=hash
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export HOROVOD_LOG_LEVEL=info
export USER=u

srun --mpi=pmix --kill-on-bad-exit=1 -N 2 --ntasks-per-node=1 ch-run -b /home/u/job:/home/u/job -c /home/u/job cpu_1.sif -- /opt/venv/bin/python train.py
