# shellcheck shell=sh
# torch's controllers, around the srun line where the job's node list is known (a batch script,
# inside salloc): the first node for every task of the step, also for runtimes whose tasks
# start inside the container, where there is no scontrol (Pyxis). Run as
# `sh -c TEXT hvd-NAME SUFFIX srun ...`: SUFFIX (the site's, often empty) follows the node's name.
# The step's first node: the job's first node that srun's --nodelist names (when it names any)
# and its --exclude leaves (a screened run excludes bad nodes, the first among them too);
# srun's options end at the first word that is neither an option nor a count.
suffix=$1; shift;
if [ -z "${MASTER_ADDR:-}" ] && [ -n "${SLURM_JOB_NODELIST:-}" ]; then
    only=; skip=;
    for word in "$@"; do
        case $word in
        srun | [0-9]*) ;;
        --nodelist=*) only=${word#--nodelist=} ;;
        -w?*) only=${word#-w} ;;
        --exclude=*) skip=${skip:+$skip,}${word#--exclude=} ;;
        -x?*) skip=${skip:+$skip,}${word#-x} ;;
        -*) ;;
        *) break ;;
        esac;
    done;
    skipped=" "; [ -z "$skip" ] || skipped=" $(scontrol show hostnames "$skip" 2>/dev/null | tr '\n' ' ')";
    named=" "; [ -z "$only" ] || named=" $(scontrol show hostnames "$only" 2>/dev/null | tr '\n' ' ')";
    MASTER_ADDR=;
    # in the job's order, which is the order of the step's node ids (rank 0 on the first)
    for node in $(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null); do
        case $skipped in *" $node "*) continue ;; esac;
        case $named in " ") ;; *" $node "*) ;; *) continue ;; esac;
        MASTER_ADDR=$node; break;
    done;
    # the suffix only where that name resolves here: the plain name, and which one, otherwise
    if [ -n "$MASTER_ADDR" ] && [ -n "$suffix" ]; then
        if getent hosts "$MASTER_ADDR$suffix" >/dev/null 2>&1; then MASTER_ADDR="$MASTER_ADDR$suffix";
        else echo "hvd-container torch: $MASTER_ADDR$suffix (the first node with the site's first_node_suffix $suffix) does not resolve on $(hostname): the rendezvous is $MASTER_ADDR" >&2; fi;
    fi;
    [ -z "$MASTER_ADDR" ] || export MASTER_ADDR;
fi;
exec "$@"
