#!/usr/bin/env bash
# The main job: install what is missing, build, then the tool's core loop on the default
# scenario (scenarios/mlp-cpu.yaml, every schedule; scenarios/mlp-gpu.yaml on the cuda backend
# when `stagecraft devices` finds it usable, asked once the build is done):
#   1. profile its model on this machine,
#   2. simulate every schedule from that profile (predicted),
#   3. execute every schedule for real on CPU ranks under MPI (measured),
#   4. compare predicted with measured, each error split into the machine's cost drift and the
#      model's error (compare --trace: a replay of each run from its own op times).
# Everything lands in build/out/. Usage: scripts/run.sh [SCENARIO]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" stagecraft  # the tool alone: the tests build in scripts/test.sh
sc="$root/build/cli/stagecraft"
scenario="${1:-$root/scenarios/mlp-cpu.yaml}"
backend=cpu
if [[ $# -eq 0 ]]; then
  if "$sc" devices --quiet; then
    scenario="$root/scenarios/mlp-gpu.yaml"
  else
    echo "note: the cpu scenario, as stagecraft devices says: $("$sc" devices | sed -n 's/^verdict: //p')"
  fi
fi
# A *-gpu scenario runs on the cuda backend when this build and machine have one, else on the
# cpu (and stops at once, naming the GPU, when a GPU is there that this build cannot use).
if [[ "$scenario" == *-gpu.yaml ]]; then backend=auto; fi
out="$root/build/out"
mkdir -p "$out"
ranks="$(sed -n 's/^ *ranks: *\([0-9]*\).*/\1/p' "$scenario" | head -1)"
# execute runs pipeline.data_parallel replicas of the pipeline: ranks x D processes.
replicas="$(sed -n 's/^ *data_parallel: *\([0-9]*\).*/\1/p' "$scenario" | head -1)"
np=$((ranks * ${replicas:-1}))

echo "== 1/4 profile the model on this machine ($ranks ranks at once, as loaded as the run)"
"$root/scripts/mpirun.sh" "$ranks" "$sc" profile "$scenario" --backend "$backend" --out "$out/profile.yaml"
echo
echo "== 2/4 simulate every schedule from the measured profile"
"$sc" simulate "$scenario" --set model.profile="$out/profile.yaml" \
  --json "$out/predicted.json" --trace "$out/predicted.trace.json"
echo
echo "== 3/4 execute every schedule on $np MPI ranks (backend $backend)"
# The profile travels along so that a cost-balanced split (pipeline.partition: balanced) is the
# one the prediction used.
"$root/scripts/mpirun.sh" "$np" "$sc" execute "$scenario" --backend "$backend" --set model.profile="$out/profile.yaml" \
  --json "$out/measured.json" --trace "$out/measured.trace.json"
echo
echo "== 4/4 predicted vs measured"
"$sc" compare "$out/predicted.json" "$out/measured.json" --trace "$out/measured.trace.json"
echo
echo "written to build/out/: profile.yaml, predicted.json, measured.json and per schedule"
echo "predicted.trace.<schedule>.json / measured.trace.<schedule>.json (open in ui.perfetto.dev)"
