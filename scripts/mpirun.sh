#!/usr/bin/env bash
# mpirun with what stagecraft's scripts need everywhere: allowed as root (containers, CI),
# oversubscription when there are more ranks than cores, and no core binding then (a bound
# rank cannot move off a core another rank is using), and quiet: a failed job says its cause in
# one stagecraft line, without Open MPI's notices after it.
# Usage: scripts/mpirun.sh NP COMMAND [ARGS...]
set -euo pipefail
np="$1"; shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
flags=()
if (( np > $(nproc) )); then flags+=(--oversubscribe --bind-to none); fi
exec mpirun --quiet -np "$np" "${flags[@]}" "$@"
