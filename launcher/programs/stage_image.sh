# shellcheck shell=sh
# --stage: the image file copied to node-local storage on every node of the allocation with
# sbcast (Slurm's own tree broadcast) before the step, and the step run with that copy wherever
# it named the image (a word of its own, or after `=`). Run as
# `sh -c TEXT hvd-stage DIR IMAGE srun ...` inside the allocation: the job's id names the copy,
# so jobs sharing a node never write over one another's.
dir=$1; image=$2; shift 2;
if [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "hvd-container stage: no SLURM_JOB_ID: sbcast copies to the nodes of an allocation (run this inside salloc or a batch job)" >&2; exit 1;
fi;
copy="$dir/hvd-stage-$SLURM_JOB_ID-${image##*/}";
if ! sbcast --force "$image" "$copy"; then
    echo "hvd-container stage: sbcast $image $copy failed: is $dir writable on every node?" >&2; exit 1;
fi;
echo "hvd-container stage: $image copied to $copy on the job's nodes" >&2;
n=$#;
while [ "$n" -gt 0 ]; do
    word=$1; shift;
    case $word in
        "$image") word=$copy;;
        *"=$image") word="${word%"$image"}$copy";;
    esac;
    set -- "$@" "$word"; n=$((n - 1));
done;
exec "$@"
