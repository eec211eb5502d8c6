# Rendered by hvd-container from recipe zih-alpha-pt113 1.
# Do not edit: change the recipe and render again.
# hvd-container phase: base
FROM nvidia/cuda:11.7.1-cudnn8-devel-ubuntu22.04 AS horovod-deps
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
    && apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev libpmix-dev \
    && rm -rf /var/lib/apt/lists/*
RUN mpirun --version

# hvd-container phase: mpi
ENV CUDA_HOME=/usr/local/cuda
RUN test -d /usr/local/cuda-11.7 || { echo 'base image has no /usr/local/cuda-11.7' >&2; exit 1; }

# hvd-container phase: frameworks
ARG HVD_PIP_CONFIG_URL=
COPY hvd-pip /usr/local/bin/hvd-pip
RUN chmod 0755 /usr/local/bin/hvd-pip

# hvd-container phase: frameworks
COPY horovod-build.lock /opt/hvd/horovod-build.lock
RUN hvd-pip install --no-cache-dir --require-hashes --no-deps -r /opt/hvd/horovod-build.lock

# hvd-container phase: horovod
FROM horovod-deps AS horovod-wheel
ARG DEBIAN_FRONTEND=noninteractive
ARG HVD_PIP_CONFIG_URL=
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake g++ make python3.10-dev \
    && rm -rf /var/lib/apt/lists/*
COPY horovod.lock /opt/hvd/horovod.lock
RUN ldconfig /usr/local/cuda/lib64/stubs \
    && hvd_src=$(mktemp -d) \
    && hvd-pip download --no-deps --no-binary :all: -d "$hvd_src" --require-hashes -r /opt/hvd/horovod.lock \
    && tar -xzf "$hvd_src/horovod-0.28.1.tar.gz" -C "$hvd_src" \
    && cd "$hvd_src/horovod-0.28.1" \
    && sed -i '0,/^#include/s//#include <cstdint>\n#include <stdexcept>\n#include <string>\n&/' horovod/common/common.h \
    && sed -i '0,/^#include/s//#include <cstdint>\n#include <stdexcept>\n#include <string>\n&/' horovod/common/group_table.h \
    && grep -q '^#include <cstdint>' horovod/common/common.h \
    && grep -q '^#include <stdexcept>' horovod/common/common.h \
    && grep -q '^#include <string>' horovod/common/common.h \
    && grep -q '^#include <cstdint>' horovod/common/group_table.h \
    && grep -q '^#include <stdexcept>' horovod/common/group_table.h \
    && grep -q '^#include <string>' horovod/common/group_table.h \
    && sed -i 's/^  const size_type count_;$/  size_type count_;/' third_party/flatbuffers/include/flatbuffers/stl_emulation.h \
    && grep -q '^  size_type count_;$' third_party/flatbuffers/include/flatbuffers/stl_emulation.h \
    && HOROVOD_BUILD_CUDA_CC_LIST=80 HOROVOD_CUDA_HOME=/usr/local/cuda HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_PYTORCH=1 hvd-pip wheel --no-cache-dir --no-build-isolation --no-deps -w /opt/hvd/wheels . \
    && cd / \
    && rm -rf "$hvd_src"

# hvd-container phase: frameworks
FROM horovod-deps
ARG DEBIAN_FRONTEND=noninteractive
ARG HVD_PIP_CONFIG_URL=

# hvd-container phase: frameworks
COPY requirements.lock /opt/hvd/requirements.lock
RUN hvd-pip install --no-cache-dir --require-hashes --no-deps -r /opt/hvd/requirements.lock

# hvd-container phase: frameworks
RUN python3 -c 'import torch; v = torch.__version__; assert v.startswith("1.13.1"), "torch " + v + " is not 1.13.1"'

# hvd-container phase: horovod
COPY --from=horovod-wheel /opt/hvd/wheels/ /opt/hvd/wheels/
RUN hvd-pip install --no-cache-dir --no-deps /opt/hvd/wheels/horovod-0.28.1-*.whl \
    && ldconfig \
    && horovodrun --check-build

# hvd-container phase: extras
LABEL org.hvd-container.recipe.name="zih-alpha-pt113"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="f0e4ebd6ca9f907b7afc07daac62c7dd4ca69e0c6d98b8238efafdff4ffa8a44"
LABEL org.hvd-container.arch="amd64"

# hvd-container phase: checks
RUN python -c 'import torch, numpy, horovod.torch; assert torch.__version__ == "1.13.1", torch.__version__; assert numpy.__version__ < "2"'
