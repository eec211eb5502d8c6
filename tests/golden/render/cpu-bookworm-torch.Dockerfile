# Rendered by hvd-container from recipe cpu-bookworm-torch 1.
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
RUN python3 -c 'import torch; v = torch.__version__; assert v.startswith("2.13.0"), "torch " + v + " is not 2.13.0"'

# hvd-container phase: extras
ENV OMPI_ALLOW_RUN_AS_ROOT="1"
ENV OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"
LABEL org.hvd-container.recipe.name="cpu-bookworm-torch"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="5c42a1bf774fe83d7e0052b36ff2b2565caf5cec15f8c289655cd8599f3505ff"
LABEL org.hvd-container.arch="amd64"

# hvd-container phase: checks
RUN python -c 'import torch, torch.distributed as dist; assert dist.is_gloo_available(); print(torch.__version__)'
