"""hvd-container: Horovod/Lightning images and launch lines for HPC sites."""
