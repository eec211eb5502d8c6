# Rendered by hvd-container from recipe cpu-bookworm-torch-arm64 1.
# Do not edit: change the recipe and render again.
# hvd-container phase: base
FROM --platform=linux/arm64 hvd-base/debian:bookworm-arm64
ARG DEBIAN_FRONTEND=noninteractive

# hvd-container phase: base
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates python3.11 python3.11-dev python3.11-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3.11 -m venv /opt/venv \
    && /opt/venv/bin/python -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version'
ENV VIRTUAL_ENV=/opt/venv
ENV PATH=/opt/venv/bin:$PATH

# hvd-container phase: frameworks
ARG HVD_PIP_CONFIG_URL=
COPY hvd-pip /usr/local/bin/hvd-pip
RUN chmod 0755 /usr/local/bin/hvd-pip

# hvd-container phase: frameworks
COPY requirements.lock /opt/hvd/requirements.lock
RUN hvd-pip install --no-cache-dir --require-hashes --no-deps -r /opt/hvd/requirements.lock

# hvd-container phase: frameworks
RUN python3 -c 'import torch; v = torch.__version__; assert v.startswith("2.9.1"), "torch " + v + " is not 2.9.1"'

# hvd-container phase: extras
ENV OMPI_ALLOW_RUN_AS_ROOT="1"
ENV OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"
LABEL org.hvd-container.recipe.name="cpu-bookworm-torch-arm64"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="7dd3fe207aa9619e3de28d9001244ec1a000498c532cb4fe03555d2f5a86886d"
LABEL org.hvd-container.arch="arm64"

# hvd-container phase: checks
RUN python -c 'import platform, torch, torch.distributed as dist; assert platform.machine() == "aarch64"; assert dist.is_gloo_available(); assert not torch.cuda.is_available(); print(torch.__version__)'
