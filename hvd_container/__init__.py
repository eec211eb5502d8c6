"""hvd-container: Horovod/Lightning images and launch lines for HPC sites."""

__version__ = "0.1.0"
