"""hvd-container: PyTorch DDP/FSDP, Horovod and Lightning images and launch lines for HPC sites."""
