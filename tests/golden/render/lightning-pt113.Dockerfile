# Rendered by hvd-container from recipe lightning-pt113 1.
# Do not edit: change the recipe and render again.
# hvd-container phase: base
FROM nvidia/cuda:11.7.1-cudnn8-devel-ubuntu22.04
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
ENV CUDA_HOME=/usr/local/cuda
RUN test -d /usr/local/cuda-11.7 || { echo 'base image has no /usr/local/cuda-11.7' >&2; exit 1; }

# hvd-container phase: frameworks
ARG HVD_PIP_CONFIG_URL=
COPY hvd-pip /usr/local/bin/hvd-pip
RUN chmod 0755 /usr/local/bin/hvd-pip

# hvd-container phase: frameworks
RUN hvd-pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cu117 torch==1.13.0+cu117 torchvision==0.14.0+cu117 torchaudio==0.13.0+cu117

# hvd-container phase: frameworks
RUN hvd-pip install --no-cache-dir lightning==2.0.2

# hvd-container phase: extras
RUN hvd-pip install --no-cache-dir tensorboard

# hvd-container phase: extras
LABEL org.hvd-container.recipe.name="lightning-pt113"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="fb9f2c526dfd48457f5ce338836d62f3accd3a1581bf4931ec9d307f29166faf"
LABEL org.hvd-container.arch="amd64"

# hvd-container phase: checks
RUN python -c 'import torch, lightning; print(torch.__version__, lightning.__version__)'
