# Rendered by hvd-container from recipe gpu-bookworm-torch 1.
# Do not edit: change the recipe and render again.
# hvd-container phase: base
FROM hvd-base/debian:bookworm
ARG DEBIAN_FRONTEND=noninteractive

# hvd-container phase: base
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates python3.11 python3.11-dev python3.11-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3.11 -m venv /opt/venv \
    && /opt/venv/bin/python -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version'
ENV VIRTUAL_ENV=/opt/venv
ENV PATH=/opt/venv/bin:$PATH

# hvd-container phase: mpi
RUN apt-get update \
    && apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev libpmix-dev \
    && rm -rf /var/lib/apt/lists/*
RUN mpirun --version | grep -F 4.1.4

# hvd-container phase: frameworks
ARG HVD_PIP_CONFIG_URL=
COPY hvd-pip /usr/local/bin/hvd-pip
RUN chmod 0755 /usr/local/bin/hvd-pip

# hvd-container phase: frameworks
COPY requirements.lock /opt/hvd/requirements.lock
RUN hvd-pip install --no-cache-dir --require-hashes --no-deps -r /opt/hvd/requirements.lock

# hvd-container phase: frameworks
RUN test -x /opt/venv/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc || { echo 'no nvcc in /opt/venv/lib/python3.11/site-packages/nvidia/cu13' >&2; exit 1; } \
    && ln -s lib /opt/venv/lib/python3.11/site-packages/nvidia/cu13/lib64 \
    && ln -s libcudart.so.13 /opt/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so \
    && ln -s /opt/venv/lib/python3.11/site-packages/nvidia/cu13 /usr/local/cuda \
    && test -f /opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2 || { echo 'no libnccl.so.2 in /opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib' >&2; exit 1; } \
    && ln -s libnccl.so.2 /opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so \
    && printf '%s\n' /opt/venv/lib/python3.11/site-packages/nvidia/cu13/lib /opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib > /etc/ld.so.conf.d/hvd-gpu-wheels.conf \
    && ldconfig
ENV CUDA_HOME=/usr/local/cuda
ENV PATH=/usr/local/cuda/bin:$PATH

# hvd-container phase: frameworks
RUN python3 -c 'import torch; v = torch.__version__; assert v.startswith("2.14.1"), "torch " + v + " is not 2.14.1"'

# hvd-container phase: extras
ENV OMPI_ALLOW_RUN_AS_ROOT="1"
ENV OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"
LABEL org.hvd-container.recipe.name="gpu-bookworm-torch"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="c13776f4244976e636f13398b2b22dc323116ab5ad65fdf7337aa52d0443e1b0"
LABEL org.hvd-container.arch="amd64"

# hvd-container phase: checks
RUN python -c 'import torch, torch.distributed as dist; assert torch.__version__.startswith("2.14.1"), torch.__version__; assert torch.version.cuda.startswith("13.0"), torch.version.cuda; assert dist.is_nccl_available() and dist.is_gloo_available()'
