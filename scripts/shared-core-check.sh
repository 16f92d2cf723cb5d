#!/usr/bin/env bash
# Ranks that share a device, predicted against measured on this machine's cores (issue 52,
# point 2): the main scenario as 4 pipeline ranks on 2 cores (pipeline.ranks_per_device 2), every
# schedule. ROUNDS independent rounds, each a profile of the layout (`stagecraft profile` under
# mpirun: the layers, then the calibration runs, both as the layout runs), its prediction
# (`simulate`) and an execution; tools/stagecraft_tools/shared_core.py holds the model to the median over
# the rounds of each schedule's errors, the rounds' spread beside it. One profile or one execution
# on a shared machine drifts by tens of percent; the median of several rounds is what the model
# is held to.
# A benchmark, not a test: exits 0 whatever the errors (non-zero when a run fails).
#
# Usage: scripts/shared-core-check.sh [ROUNDS]   (default 5); SHARED_CORE_SETS adds --set
# overrides (e.g. "--set pipeline.steps=5"); everything lands in build/out/shared-core/
# (SHARED_CORE_OUT elsewhere); STAGECRAFT names the binary (default build/cli/stagecraft).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="${STAGECRAFT:-$root/build/cli/stagecraft}"
out="${SHARED_CORE_OUT:-$root/build/out/shared-core}"
rounds="${1:-5}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [ROUNDS]" >&2; exit 2; }
[[ -x "$sc" ]] || { echo "missing $sc: run scripts/build.sh first" >&2; exit 1; }
scenario="$root/scenarios/mlp-cpu.yaml"
read -r -a extra <<< "${SHARED_CORE_SETS:-}"
sets=(--set pipeline.ranks=4 --set pipeline.ranks_per_device=2 --set topology.devices_per_node=2
      --set pipeline.schedule=all "${extra[@]}")
rm -rf "$out"
mkdir -p "$out"
read -r load1 _ < /proc/loadavg
echo "scenario $scenario as 4 ranks on 2 devices, $rounds round(s), $(nproc) cores, 1-minute load $load1"

# Runs "$@" with its output in $d/$label.log; a failure ends the script.
step() {
  local d="$1" label="$2"
  shift 2
  if ! "$@" >"$d/$label.log" 2>&1; then
    echo "$d: $label failed:" >&2
    tail -n 20 "$d/$label.log" >&2
    exit 1
  fi
}
dirs=()
for ((k = 1; k <= rounds; ++k)); do
  d="$out/round$k"
  mkdir -p "$d"
  step "$d" profile "$root/scripts/mpirun.sh" 4 "$sc" profile "$scenario" "${sets[@]}" --out "$d/profile.yaml"
  step "$d" simulate "$sc" simulate "$scenario" "${sets[@]}" --set model.profile="$d/profile.yaml" --json "$d/predicted.json"
  step "$d" execute "$root/scripts/mpirun.sh" 4 "$sc" execute "$scenario" "${sets[@]}" \
    --set model.profile="$d/profile.yaml" --json "$d/measured.json"
  dirs+=("$d")
done
"$root/scripts/tool.sh" shared_core "${dirs[@]}" | tee "$out/report.txt"
