# Rendered by hvd-container from recipe gpu-bookworm 1.
# Do not edit: change the recipe and render again.
# hvd-container phase: base
FROM hvd-base/debian:bookworm AS horovod-deps
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
COPY horovod-build.lock /opt/hvd/horovod-build.lock
RUN hvd-pip install --no-cache-dir --require-hashes --no-deps -r /opt/hvd/horovod-build.lock

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

# hvd-container phase: horovod
FROM horovod-deps AS horovod-wheel
ARG DEBIAN_FRONTEND=noninteractive
ARG HVD_PIP_CONFIG_URL=
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake g++ make python3.11-dev \
    && rm -rf /var/lib/apt/lists/*
COPY horovod.lock /opt/hvd/horovod.lock
RUN hvd_src=$(mktemp -d) \
    && hvd-pip download --no-deps --no-binary :all: -d "$hvd_src" --require-hashes -r /opt/hvd/horovod.lock \
    && tar -xzf "$hvd_src/horovod-0.28.1.tar.gz" -C "$hvd_src" \
    && cd "$hvd_src/horovod-0.28.1" \
    && sed -i -E 's/set\(CMAKE_CXX_STANDARD 1[47]\)/set(CMAKE_CXX_STANDARD 20)/' CMakeLists.txt horovod/torch/CMakeLists.txt \
    && ! grep -nE 'CMAKE_CXX_STANDARD 1[47]' CMakeLists.txt horovod/torch/CMakeLists.txt \
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
    && HOROVOD_BUILD_CUDA_CC_LIST=80,90 HOROVOD_CUDA_HOME=/usr/local/cuda HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_HOME=/opt/venv/lib/python3.11/site-packages/nvidia/nccl HOROVOD_NCCL_LINK=SHARED HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_PYTORCH=1 hvd-pip wheel --no-cache-dir --no-build-isolation --no-deps -w /opt/hvd/wheels . \
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
RUN python3 -c 'import torch; v = torch.__version__; assert v.startswith("2.14.1"), "torch " + v + " is not 2.14.1"'

# hvd-container phase: horovod
COPY --from=horovod-wheel /opt/hvd/wheels/ /opt/hvd/wheels/
RUN hvd-pip install --no-cache-dir --no-deps /opt/hvd/wheels/horovod-0.28.1-*.whl \
    && ldconfig \
    && horovodrun --check-build

# hvd-container phase: extras
ENV OMPI_ALLOW_RUN_AS_ROOT="1"
ENV OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"
LABEL org.hvd-container.recipe.name="gpu-bookworm"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="40ff6fce2fda62c74892e41eb02839e324224e3836739205086f46ec2f4d9c45"
LABEL org.hvd-container.arch="amd64"

# hvd-container phase: checks
RUN python -c 'import torch, horovod.torch as hvd; assert torch.__version__.startswith("2.14.1"), torch.__version__; assert torch.version.cuda.startswith("13.0"), torch.version.cuda; assert hvd.nccl_built(), "horovod has no NCCL"'
RUN nvcc --version
