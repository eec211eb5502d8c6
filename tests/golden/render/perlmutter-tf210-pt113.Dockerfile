# Rendered by hvd-container from recipe perlmutter-tf210-pt113 1.
# Do not edit: change the recipe and render again.
# hvd-container phase: base
FROM nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04
ARG DEBIAN_FRONTEND=noninteractive

# hvd-container phase: base
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates python3.10 python3.10-dev python3.10-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3.10 -m venv /opt/venv \
    && /opt/venv/bin/python -c 'import sys; assert sys.version_info[:2] == (3, 10), sys.version'
ENV VIRTUAL_ENV=/opt/venv
ENV PATH=/opt/venv/bin:$PATH

# hvd-container phase: mpi
RUN apt-get update \
    && apt-get install -y --no-install-recommends mpich libmpich-dev \
    && rm -rf /var/lib/apt/lists/*
RUN mpirun --version

# hvd-container phase: mpi
ENV CUDA_HOME=/usr/local/cuda
RUN test -d /usr/local/cuda-11.8 || { echo 'base image has no /usr/local/cuda-11.8' >&2; exit 1; }

# hvd-container phase: mpi
RUN apt-get update \
    && apt-get install -y --no-install-recommends --allow-change-held-packages libnccl2=2.15.5-1+cuda11.8 libnccl-dev=2.15.5-1+cuda11.8 \
    && rm -rf /var/lib/apt/lists/*

# hvd-container phase: frameworks
ARG HVD_PIP_CONFIG_URL=
COPY hvd-pip /usr/local/bin/hvd-pip
RUN chmod 0755 /usr/local/bin/hvd-pip

# hvd-container phase: frameworks
RUN hvd-pip install --no-cache-dir tensorflow==2.10.1

# hvd-container phase: frameworks
RUN hvd-pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cu117 torch==1.13.1+cu117 torchvision==0.14.1+cu117 torchaudio==0.13.1+cu117

# hvd-container phase: horovod
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake g++ make python3.10-dev \
    && rm -rf /var/lib/apt/lists/*
RUN hvd-pip install --no-cache-dir setuptools wheel packaging cloudpickle psutil pyyaml
RUN ldconfig /usr/local/cuda/lib64/stubs \
    && HOROVOD_CUDA_HOME=/usr/local/cuda HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_TENSORFLOW=1 hvd-pip install --no-cache-dir --no-build-isolation horovod==0.28.1 \
    && ldconfig \
    && horovodrun --check-build

# hvd-container phase: extras
LABEL org.hvd-container.recipe.name="perlmutter-tf210-pt113"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="571d7eb7183c8ab3f22ff90bd8dadc6aa9faa148a1e7caf44ec5975850cc7d8a"
LABEL org.hvd-container.arch="amd64"

# hvd-container phase: checks
RUN python -c 'import tensorflow, horovod.tensorflow.keras'
RUN python -c 'import torch, horovod.torch'
