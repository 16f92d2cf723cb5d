#!/usr/bin/env bash
# The whole GPU verification, one command, one report (build/gpu-check/):
#   1. a machine with no NVIDIA driver at all (no /dev/nvidiactl, no /proc/driver/nvidia) is
#      told so at once, exit 4, before anything is built; otherwise build (scripts/build.sh), then
#      ask `stagecraft devices`: without a usable GPU, print one line saying why and exit with its
#      code (3 no cuda backend, 4 no GPU, 5 a GPU this build cannot use; see `stagecraft devices
#      --help`);
#   2. ctest -L gpu (no gpu test may skip here);
#   3. profile -> simulate -> execute -> compare on the cuda backend, as scripts/run.sh chains
#      them, for scenarios/mlp-gpu.yaml and scenarios/gpt-gpu.yaml; compare --trace splits each
#      error into the run's cost drift and the model's error (issue 31's protocol), and a
#      what-if replays the run's 1F1B into every schedule and compares with their runs; with
#      fewer GPUs than the scenario's ranks, the same again on one rank (NAME-1rank), since ranks
#      sharing a GPU time-slice it and the simulator gives each rank a device of its own;
#   4. scripts/layer-probe.sh: one transformer block of each Zero Bubble paper model timed kernel
#      by kernel with the machine's PyTorch, beside the roofline model's kernels on this GPU; then
#      again with the list's fused kernels as one kernel each (--fused, torch.compile); then, where
#      build/zb-fork is prepared, the paper's own middle stage with its own timers
#      (scripts/zb-fork-layer.sh).
#   5. the GPU benchmarks: tests/bench/cuda_bench (each layer op's GEMM rate against bare
#      cuBLAS, target >= 0.6; the runtime's cost per op, target <= 10 us) and, with 2 GPUs,
#      nccl_p2p_bench (point-to-point bandwidth of raw NCCL, the NcclTransport, host staging);
# A step that fails is recorded and the rest still run (a step whose input is missing is
# recorded as failed). report.md holds every number and ends in "N passed, M failed"; beside it
# summary.json, devices.json, ctest-gpu.xml, the benchmarks' JSON, one folder per scenario and
# logs/. Exit 0 only when M is 0.
# Usage: scripts/gpu-check.sh [--dry-run] [--no-build] [--one-rank] [--build-dir DIR] [--out DIR]
#   --dry-run    print each step's command, run nothing
#   --no-build   use the build in --build-dir as it is (default build/, built first)
#   --one-rank   where the GPUs are fewer than a scenario's ranks, run only its one-rank loop (the
#                shared-GPU loop measures ranks time-slicing one GPU, which the simulator does not
#                model; skipping it saves about 3 minutes of a short lease)
# Each step may take GPU_CHECK_STEP_TIMEOUT seconds (default 3600); GPU_CHECK_BENCH_FILTER (a
# Google Benchmark --benchmark_filter regex, default all) picks cuda_bench's benchmarks.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build" out="" dry=0 do_build=1 one_rank=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --no-build) do_build=0 ;;
    --one-rank) one_rank=1 ;;
    --build-dir) build="$(cd "${2:?--build-dir DIR}" && pwd)" || exit 2; shift ;;
    --out) out="${2:?--out DIR}"; shift ;;
    *) echo "usage: scripts/gpu-check.sh [--dry-run] [--no-build] [--one-rank] [--build-dir DIR] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
out="${out:-$build/gpu-check}"
sc="$build/cli/stagecraft"
step_timeout="${GPU_CHECK_STEP_TIMEOUT:-3600}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# step NAME COMMAND...: runs COMMAND under the step timeout, its output in logs/, and records
# pass or fail (or skip, when the command printed a line starting with SKIPPED) in steps.tsv.
step() {
  local name="$1"; shift
  if [[ $dry -eq 1 ]]; then printf '%s:' "$name"; printf ' %q' "$@"; echo; return 0; fi
  local log="logs/${name//[^A-Za-z0-9._-]/_}.log" start=$SECONDS rc status detail
  timeout "$step_timeout" "$@" >"$out/$log" 2>&1
  rc=$?
  status=pass detail=""
  if [[ $rc -ne 0 ]]; then
    status=fail detail="exit $rc: $(grep -m1 'error' "$out/$log" | cut -c1-200)"
    [[ $rc -eq 124 ]] && detail="timed out after $step_timeout s"
  elif grep -q '^SKIPPED' "$out/$log"; then
    status=skip detail="$(grep -m1 '^SKIPPED' "$out/$log" | cut -c1-200)"
  fi
  printf '%s\t%s\t%d\t%s\t%s\n' "$name" "$status" $((SECONDS - start)) "$detail" "$log" >>"$out/steps.tsv"
  printf '[%s] %s (%d s)\n' "$status" "$name" $((SECONDS - start))
  [[ $status != fail ]]
}
# blocked NAME WHY: a step that cannot run, recorded as failed.
blocked() {
  if [[ $dry -eq 0 ]]; then
    printf '%s\tfail\t0\tnot run: %s\t\n' "$1" "$2" >>"$out/steps.tsv"
    printf '[fail] %s (not run: %s)\n' "$1" "$2"
  fi
}

if [[ $dry -eq 0 ]]; then
  rm -rf "$out" && mkdir -p "$out/logs" || exit 1
  : >"$out/steps.tsv"
fi
# No driver, no GPU: said in a second, not after a build of many minutes. The driver's traces are
# looked for where it leaves them (GPU_CHECK_DRIVER_PATHS, space-separated, replaces the list:
# for the test of this path).
driver_paths="${GPU_CHECK_DRIVER_PATHS-/dev/nvidiactl /proc/driver/nvidia/version}"
driver=0
for p in $driver_paths; do [[ -e "$p" ]] && driver=1; done
if [[ $driver -eq 0 && $dry -eq 0 && $do_build -eq 1 ]]; then
  why="no GPU: no NVIDIA driver on this machine (none of: $driver_paths); nothing was built"
  printf 'devices\tfail\t0\t%s\t\n' "$why" >>"$out/steps.tsv"
  python3 "$root/scripts/gpu_check_report.py" "$out" >/dev/null
  echo "gpu-check: $why"
  exit 4
fi
if [[ $do_build -eq 1 ]]; then
  if [[ $dry -eq 1 ]]; then printf 'build: %q\n' "$root/scripts/build.sh"
  elif ! "$root/scripts/build.sh" >"$out/logs/build.log" 2>&1; then
    echo "gpu-check: the build failed (see $out/logs/build.log)"
    exit 1
  fi
fi

# ---- 1. is there a usable GPU? ------------------------------------------------------------------
if [[ $dry -eq 1 ]]; then
  printf 'devices: %q devices --json %q\n' "$sc" "$out/devices.json"
else
  "$sc" devices --json "$out/devices.json" >"$out/logs/devices.log" 2>&1
  devices_rc=$?
  if [[ $devices_rc -ne 0 ]]; then
    why="$(sed -n 's/^verdict: //p' "$out/logs/devices.log")"
    printf 'devices\tfail\t0\t%s\tlogs/devices.log\n' "${why:-$(head -c 200 "$out/logs/devices.log")}" >>"$out/steps.tsv"
    python3 "$root/scripts/gpu_check_report.py" "$out" >/dev/null
    echo "gpu-check: ${why:-stagecraft devices exited $devices_rc (see $out/logs/devices.log)}"
    exit "$devices_rc"
  fi
  printf 'devices\tpass\t0\t%s\tlogs/devices.log\n' "$(grep -c '^GPU ' "$out/logs/devices.log") GPU(s)" >>"$out/steps.tsv"
fi

# ---- 2. the gpu tests ---------------------------------------------------------------------------
step "ctest -L gpu" ctest --test-dir "$build" -L gpu --output-on-failure --timeout 900 \
  --output-junit "$out/ctest-gpu.xml"

# ---- 3. the core loop on the GPU scenarios ------------------------------------------------------
# core_loop NAME SCENARIO RANKS [ARGS...]: profile -> simulate -> execute -> compare of SCENARIO on
# RANKS processes (ARGS: --set overrides for every command), into $out/NAME.
core_loop() {
  local name="$1" scenario="$2" ranks="$3"; shift 3
  local d="$out/$name" sets=("$@")
  [[ $dry -eq 1 ]] || mkdir -p "$d"
  step "$name: profile" "$root/scripts/mpirun.sh" "$ranks" "$sc" profile "$scenario" "${sets[@]}" --backend cuda \
    --out "$d/profile.yaml"
  if [[ $dry -eq 1 || -s "$d/profile.yaml" ]]; then
    step "$name: simulate" "$sc" simulate "$scenario" "${sets[@]}" --set model.profile="$d/profile.yaml" \
      --json "$d/predicted.json" --trace "$d/predicted.trace.json"
  else
    blocked "$name: simulate" "needs the profile"
  fi
  local with_profile=()
  [[ $dry -eq 1 || -s "$d/profile.yaml" ]] && with_profile=(--set model.profile="$d/profile.yaml")
  step "$name: execute" "$root/scripts/mpirun.sh" "$ranks" "$sc" execute "$scenario" "${sets[@]}" --backend cuda \
    "${with_profile[@]}" --json "$d/measured.json" --trace "$d/measured.trace.json"
  if [[ $dry -eq 1 || ( -s "$d/predicted.json" && -s "$d/measured.json" ) ]]; then
    step "$name: compare" "$sc" compare "$d/predicted.json" "$d/measured.json" --trace "$d/measured.trace.json" \
      --json "$d/compare.json"
  else
    blocked "$name: compare" "needs predicted.json and measured.json"
  fi
  # What-if: the run's 1F1B alone predicts every schedule of the same run (replay --set), which
  # was executed minutes later on the same GPU.
  if [[ $dry -eq 1 || -s "$d/measured.trace.1f1b.json" ]]; then
    step "$name: what-if" "$sc" replay "$d/measured.json" --trace "$d/measured.trace.1f1b.json" \
      --set pipeline.schedule=all --json "$d/whatif.json"
    [[ $dry -eq 1 || -s "$d/whatif.json" ]] &&
      step "$name: what-if compare" "$sc" compare "$d/whatif.json" "$d/measured.json" --json "$d/whatif-compare.json"
  else
    blocked "$name: what-if" "needs the run's 1f1b trace"
  fi
}
gpus=0
[[ $dry -eq 1 ]] || gpus="$(grep -c '^GPU ' "$out/logs/devices.log")"
for scenario in "$root/scenarios/mlp-gpu.yaml" "$root/scenarios/gpt-gpu.yaml"; do
  name="$(basename "$scenario" .yaml)"
  ranks="$(sed -n 's/^ *ranks: *\([0-9]*\).*/\1/p' "$scenario" | head -1)"
  if [[ $dry -eq 1 || $one_rank -eq 0 ]] || (( gpus >= ranks )); then
    core_loop "$name" "$scenario" "$ranks"
  else
    printf '%s\tskip\t0\t%s\t\n' "$name" "--one-rank: $ranks ranks, $gpus GPU(s); only the one-rank loop" >>"$out/steps.tsv"
  fi
  # With fewer GPUs than ranks, ranks share a GPU and time-slice it, which the simulator (a
  # device per rank) does not model: their op times overlap and the replay counts them twice.
  # One rank alone on the GPU then checks the cost model without that (5 steps, to save time).
  if [[ $dry -eq 1 ]] || (( gpus < ranks )); then
    core_loop "$name-1rank" "$scenario" 1 --set pipeline.ranks=1 --set pipeline.steps=5
  fi
done

# ---- 4. the kernel list, kernel by kernel -------------------------------------------------------
# One block of each Zero Bubble paper model timed kernel by kernel with PyTorch, against the
# roofline model's prediction on this GPU's device file (issue 30, point 6; docs/cost-model.md).
step "layer probe" env STAGECRAFT="$sc" "$root/scripts/layer-probe.sh" --out "$out"
# The same blocks with the list's fused kernels as one kernel each (torch.compile): the rates the
# device file's memory_kernels states for them.
step "layer probe, fused" env STAGECRAFT="$sc" "$root/scripts/layer-probe.sh" --out "$out/layer-probe-fused" --fused
# The Zero Bubble paper's own middle stage (its code release's Megatron-LM fork, Apex's kernels),
# F / B / W timed with its own timers, with TorchScript's fuser on and off: whether the fork's
# layer itself shows the profile's B ~ F (scripts/zb-fork-layer.sh; its two trees are prepared
# once into build/zb-fork, not kept in the repository).
zb_fork="${ZB_FORK_DIR:-$root/build/zb-fork}"
if [[ $dry -eq 1 || -d "$zb_fork/fork/megatron" ]]; then
  step "zero bubble release's stage" env ZB_FORK_DIR="$zb_fork" STAGECRAFT="$sc" "$root/scripts/zb-fork-layer.sh" \
    --out "$out/zb-fork-layer.json"
else
  printf "zero bubble release's stage\tskip\t0\tno %s (scripts/zb-fork-layer.sh --prepare ZB_GIT APEX_GIT)\t\n" \
    "$zb_fork" >>"$out/steps.tsv"
fi

# ---- 5. the GPU benchmarks ----------------------------------------------------------------------
bench="$build/tests/bench"
if [[ $dry -eq 1 || -x "$bench/cuda_bench" ]]; then
  step "cuda_bench" "$bench/cuda_bench" --benchmark_out="$out/cuda_bench.json" --benchmark_out_format=json \
    --benchmark_filter="${GPU_CHECK_BENCH_FILTER:-.}"
else
  blocked "cuda_bench" "$bench/cuda_bench was not built"
fi
if [[ $dry -eq 1 || -x "$bench/nccl_p2p_bench" ]]; then
  # Both ranks run every benchmark; each writes its own file, and rank 0's is the one kept.
  step "nccl_p2p_bench" "$root/scripts/mpirun.sh" 2 bash -c \
    'exec "$0" --benchmark_out="$1.$OMPI_COMM_WORLD_RANK.json" --benchmark_out_format=json' \
    "$bench/nccl_p2p_bench" "$out/nccl_p2p_bench"
  [[ $dry -eq 1 ]] || { mv -f "$out/nccl_p2p_bench.0.json" "$out/nccl_p2p_bench.json" 2>/dev/null;
                        rm -f "$out"/nccl_p2p_bench.[0-9]*.json; }
elif [[ $dry -eq 0 ]]; then
  printf 'nccl_p2p_bench\tskip\t0\tthis build has no NCCL\t\n' >>"$out/steps.tsv"
fi

[[ $dry -eq 1 ]] && exit 0
echo "report: $out/report.md"
python3 "$root/scripts/gpu_check_report.py" "$out"
