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
COPY requirements.lock /opt/hvd/requirements.lock
RUN hvd-pip install --no-cache-dir --require-hashes --no-deps -r /opt/hvd/requirements.lock

# hvd-container phase: frameworks
RUN python3 -c 'import torch; v = torch.__version__; assert v.startswith("1.13.1"), "torch " + v + " is not 1.13.1"'

# hvd-container phase: frameworks
RUN python3 -c 'import lightning; v = lightning.__version__; assert v.startswith("2.0.2"), "lightning " + v + " is not 2.0.2"'

# hvd-container phase: extras
LABEL org.hvd-container.recipe.name="lightning-pt113"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="6aaad5a3fa1670afdcd83ce18a89469af9847c15cd6ca51ba4015cb8422c9e54"
LABEL org.hvd-container.arch="amd64"

# hvd-container phase: checks
RUN python -c 'import torch, lightning, numpy; assert torch.__version__ == "1.13.1", torch.__version__; assert lightning.__version__ == "2.0.2", lightning.__version__; assert numpy.__version__ < "2"'
