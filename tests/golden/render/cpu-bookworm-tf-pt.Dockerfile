# Rendered by hvd-container from recipe cpu-bookworm-tf-pt 1.
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
    && sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' CMakeLists.txt horovod/torch/CMakeLists.txt \
    && ! grep -n 'CMAKE_CXX_STANDARD 14' CMakeLists.txt horovod/torch/CMakeLists.txt \
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
    && HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_TENSORFLOW=1 hvd-pip wheel --no-cache-dir --no-build-isolation --no-deps -w /opt/hvd/wheels . \
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
RUN python3 -c 'import tensorflow; v = tensorflow.__version__; assert v.startswith("2.15.1"), "tensorflow " + v + " is not 2.15.1"'

# hvd-container phase: frameworks
RUN python3 -c 'import torch; v = torch.__version__; assert v.startswith("2.13.0"), "torch " + v + " is not 2.13.0"'

# hvd-container phase: horovod
COPY --from=horovod-wheel /opt/hvd/wheels/ /opt/hvd/wheels/
RUN hvd-pip install --no-cache-dir --no-deps /opt/hvd/wheels/horovod-0.28.1-*.whl \
    && horovodrun --check-build

# hvd-container phase: extras
ENV OMPI_ALLOW_RUN_AS_ROOT="1"
ENV OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"
LABEL org.hvd-container.recipe.name="cpu-bookworm-tf-pt"
LABEL org.hvd-container.recipe.version="1"
LABEL org.hvd-container.recipe.digest="3d1909751fd4691c3477537d8e25d4895fa23a251b73c71a73044c9950b55117"
LABEL org.hvd-container.arch="amd64"

# hvd-container phase: checks
RUN python -c 'import tensorflow as tf, torch, numpy, horovod.tensorflow.keras, horovod.torch; assert tf.__version__ == "2.15.1", tf.__version__; assert torch.__version__.startswith("2.13.0"), torch.__version__; assert numpy.__version__ == "1.26.4"'
