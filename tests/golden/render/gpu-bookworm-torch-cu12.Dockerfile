# Rendered by hvd-container from recipe gpu-bookworm-torch-cu12 1.
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
RUN test -f /opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12 || { echo 'no libcudart.so.12 in /opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib' >&2; exit 1; } \
    && ln -s libcudart.so.12 /opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so \
    && test -f /opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2 || { echo 'no libnccl.so.2 in /opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib' >&2; exit 1; } \
    && ln -s libnccl.so.2 /opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so \
    && printf '%s\n' /opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib /opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib > /etc/ld.so.conf.d/hvd-gpu-wheels.conf \
    && ldconfig

# hvd-container phase: frameworks
RUN python3 -c 'import torch; v = torch.__version__; assert v.startswith("2.10.0"), "torch " + v + " is not 2.10.0"'

# hvd-container phase: extras
ENV OMPI_ALLOW_RUN_AS_ROOT="1"
ENV OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"
LABEL org.hvd-container.recipe.name="gpu-bookworm-torch-cu12"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="35328d79fdea0c5bf0eb7e280b0f6d878ccb14747c684f50e991c84a25a3e2fc"
LABEL org.hvd-container.arch="amd64"

# hvd-container phase: checks
RUN python -c 'import torch, torch.distributed as dist; assert torch.__version__.startswith("2.10.0"), torch.__version__; assert torch.version.cuda.startswith("12.8"), torch.version.cuda; assert dist.is_nccl_available() and dist.is_gloo_available()'
RUN python -c 'import torch; flags = torch._C._cuda_getArchFlags(); assert "sm_70" in flags, flags; print(flags)'
