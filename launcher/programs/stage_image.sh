# shellcheck shell=sh
# --stage: the image file copied to node-local storage on every node of the allocation with
# sbcast (Slurm's own tree broadcast) before the step, and the step run with that copy in the
# one word that names the image for the runtime (AT: its index in the step; a word of its own,
# or after `=`): the script's own arguments are never rewritten. Run as
# `sh -c TEXT hvd-stage DIR IMAGE AT srun ...` inside the allocation; `sh -c TEXT hvd-stage DIR
# IMAGE` (no AT, no step) prints the copy's path instead, for a batch script's srun line to
# name it (`"$hvd_staged"`). The copy goes into a
# folder of the job's own on each node, made 0700 under a name nobody can guess (the job's id
# and 16 random hex digits): another user cannot make it first, link it elsewhere or rewrite
# the copy after sbcast.
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
