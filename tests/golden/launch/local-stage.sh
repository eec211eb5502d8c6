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

# stage_image.sh, run by the srun line below
IFS= read -r -d '' hvd_stage_image <<'HVD_PROGRAM_END' || :
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
HVD_PROGRAM_END

sh -c "$hvd_stage_image" hvd-stage /tmp i.sqfs srun --mpi=pmix --kill-on-bad-exit=1 -N 2 --ntasks-per-node=1 ch-run -b /home/u/job:/home/u/job -c /home/u/job i.sqfs -- /opt/venv/bin/python train.py
