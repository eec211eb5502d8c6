#!/bin/sh
# The whole path on one machine: engines up, CPU recipe built, converted to SIF, and a
# data-parallel training run across two Slurm nodes in the container.
#
#   testbed/demo.sh            (make demo)
#
# Settings (environment): RECIPE (default cpu-bookworm), OUT (default out), EPOCHS (default 5).
set -eu
cd "$(dirname "$0")/.."
RECIPE=${RECIPE:-cpu-bookworm}
OUT=${OUT:-out}
EPOCHS=${EPOCHS:-5}
HVD=${HVD:-hvd-container}
command -v "$HVD" >/dev/null 2>&1 || HVD="python3 -m hvd_container"

step() { printf '\n==> %s\n' "$*" >&2; }

step "engines: Docker, a 2-node Slurm cluster, Charliecloud, SIF tools"
sh testbed/docker.sh up
sh testbed/slurm.sh up
sh testbed/charliecloud.sh up
sh testbed/sif-tools.sh up

step "build the $RECIPE recipe"
$HVD build "$RECIPE"

EXAMPLE=$(pwd)/examples/pytorch_synthetic.py
# a recipe given as a file must still be found from the run directory
[ -f "$RECIPE" ] && RECIPE=$(cd "$(dirname "$RECIPE")" && pwd)/$(basename "$RECIPE")
mkdir -p "$OUT/demo"
cd "$OUT/demo"
# `convert` names the SIF <name>_<version>.sif, which is what the local site's
# images.template gives for --recipe: run finds it in the working directory.
step "convert it to a SIF in $(pwd)"
$HVD convert "$RECIPE" --to sif

step "train on 2 nodes x 1 rank: $HVD run --site local --recipe $RECIPE -N 2 --ntasks-per-node 1 examples/pytorch_synthetic.py"
# each demo trains from the start: the example resumes from a checkpoint it finds
rm -f checkpoints/model.pt
$HVD run --site local --recipe "$RECIPE" -N 2 --ntasks-per-node 1 \
    "$EXAMPLE" --epochs "$EPOCHS" --checkpoint checkpoints/model.pt

here=$(pwd)
step "done"
echo "image:      $(ls -t "$here"/*.sif | head -n 1)"
echo "checkpoint: $here/checkpoints/model.pt"
echo "job logs:   $(ls -t "$here"/pytorch_synthetic_*.out | head -n 1) (and .err)"
echo "jobs:       $HVD jobs"
