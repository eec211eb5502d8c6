#!/bin/bash
#SBATCH --job-name=train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --no-requeue
# hvd-container: site local, runtime charliecloud
# controller mpi (the default: train.py is not readable here, so nothing tells; pass --controller (torch or torchrun for torch.distributed) if it is not written for Horovod)

export PMIX_MCA_gds=hash
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export USER=u

# the job; the helper programs it runs (hvd_stage_image)
# and the files it reads are written at the end of this script, before the job runs
hvd_run_job() {
    # --stage: sbcast copies i.sqfs into a folder of this job's own on every node;
    # the srun line below runs that copy
    hvd_staged=$(sh -c "$hvd_stage_image" hvd-stage /tmp i.sqfs) || exit 1

    srun --mpi=pmix --kill-on-bad-exit=1 -N 2 --ntasks-per-node=1 ch-run -b /home/u/job:/home/u/job -c /home/u/job "$hvd_staged" -- /opt/venv/bin/python train.py
}

# ---- written by hvd-container for the job above: its helper programs and files ----

# stage_image.sh, run by the srun line
IFS= read -r -d '' hvd_stage_image <<'HVD_PROGRAM_END' || :
dir=$1; image=$2; at=; if [ $# -ge 3 ]; then at=$3; shift 3; fi;
if [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "hvd-container stage: no SLURM_JOB_ID: sbcast copies to the nodes of an allocation (run this inside salloc or a batch job)" >&2; exit 1;
fi;
nonce=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n');
if [ ${#nonce} -ne 16 ]; then
    echo "hvd-container stage: could not read /dev/urandom for a private folder's name" >&2; exit 1;
fi;
folder="$dir/hvd-stage-$SLURM_JOB_ID-$nonce";
# each node: DIR lets nobody else rename what is in it (not writable by others, or sticky as
# /tmp is), and the folder is made there, or (nodes that share the folder's file system) found
# made by this user, a folder and not a link, readable by nobody else
# shellcheck disable=SC2016 # the inner script reads its own $1 and $2
if ! srun --nodes="${SLURM_JOB_NUM_NODES:-1}" --ntasks="${SLURM_JOB_NUM_NODES:-1}" --ntasks-per-node=1 sh -c \
    'm=$(stat -L -c %a "$1") || exit 1; [ $((0$m & 022)) -eq 0 ] || [ $((0$m & 01000)) -ne 0 ] || exit 1;
     umask 077; mkdir "$2" 2>/dev/null; [ -d "$2" ] && [ ! -L "$2" ] && [ -O "$2" ] && [ "$(stat -c %a "$2")" = 700 ]' \
    hvd-stage-folder "$dir" "$folder"; then
    echo "hvd-container stage: could not make the private folder $folder on every node: is $dir writable there, and either yours alone or sticky (as /tmp is)?" >&2; exit 1;
fi;
copy="$folder/${image##*/}";
if ! sbcast --force "$image" "$copy"; then
    echo "hvd-container stage: sbcast $image $copy failed: is $dir writable on every node?" >&2; exit 1;
fi;
echo "hvd-container stage: $image copied to $copy on the job's nodes" >&2;
if [ -z "$at" ]; then printf '%s\n' "$copy"; exit 0; fi;
n=$#; i=0;
while [ "$i" -lt "$n" ]; do
    word=$1; shift;
    if [ "$i" -eq "$at" ]; then
        case $word in
            "$image") word=$copy;;
            *"=$image") word="${word%"$image"}$copy";;
        esac;
    fi;
    set -- "$@" "$word"; i=$((i + 1));
done;
exec "$@"
HVD_PROGRAM_END

hvd_run_job
