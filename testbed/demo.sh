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

mkdir -p "$OUT/demo"
SIF=$(cd "$OUT" && pwd)/$RECIPE.sif
step "convert it to $SIF"
$HVD convert "$RECIPE" --to sif -o "$SIF"

step "train on 2 nodes x 1 rank: $HVD run --site local --image $SIF -N 2 --ntasks-per-node 1 examples/pytorch_synthetic.py"
EXAMPLE=$(pwd)/examples/pytorch_synthetic.py
cd "$OUT/demo"
$HVD run --site local --image "$SIF" -N 2 --ntasks-per-node 1 \
    "$EXAMPLE" --epochs "$EPOCHS" --checkpoint checkpoints/model.pt

here=$(pwd)
step "done"
echo "checkpoint: $here/checkpoints/model.pt"
echo "job logs:   $(ls -t "$here"/pytorch_synthetic_*.out | head -n 1) (and .err)"
echo "jobs:       $HVD jobs"
