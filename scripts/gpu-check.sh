#!/usr/bin/env bash
# The whole GPU verification, one command, one report (build/gpu-check/):
#   1. a machine with no NVIDIA driver at all (no /dev/nvidiactl, no /proc/driver/nvidia) is
#      told so at once, exit 4, before anything is built; otherwise build (scripts/build.sh), then
#      ask `stagecraft devices`: without a usable GPU, print one line saying why and exit with its
#      code (3 no cuda backend, 4 no GPU, 5 a GPU this build cannot use; see `stagecraft devices
#      --help`);
#   2. ctest -L gpu (on one GPU only the cases that need more skip, saying so: exec.mpi_gpu_nccl,
#      cli.execute_nccl_gpu_cli; with two or more GPUs exec.mpi_gpu and exec.mpi_gpu_nccl run in step 6);
#   3. profile -> simulate -> execute -> compare on the cuda backend, as scripts/run.sh chains
#      them, for scenarios/mlp-gpu.yaml and scenarios/gpt-gpu.yaml; compare --trace splits each
#      error into the run's cost drift and the model's error (issue 31's protocol), and a
#      what-if replays the run's 1F1B into every schedule and compares with their runs. With
#      fewer GPUs than the scenario's ranks, the ranks share them as the simulator models it:
#      every command of the loop gets --set pipeline.ranks_per_device=K (K = ceil(ranks / GPUs))
#      and topology.devices_per_node = the GPUs they use. Then, where ranks share, one rank alone
#      (NAME-1rank: 1F1B, 5 steps) checks the cost model without the sharing;
#   4. scripts/layer-probe.sh: one transformer block of each Zero Bubble paper model timed kernel
#      by kernel with the machine's PyTorch, beside the roofline model's kernels on this GPU. With
#      --long, again with the list's fused kernels as one kernel each (--fused, torch.compile),
#      and, where build/zb-fork is prepared, the paper's own middle stage with its own timers
#      (scripts/zb-fork-layer.sh), and gpt-gpu on one rank beside PyTorch eager and torch.compile
#      (scripts/tool.sh gpu_peer_bench, bench-gpu.sh's section 4);
#   5. tests/bench/cuda_bench: each layer op's GEMM rate against bare cuBLAS (target >= 0.9) and
#      the runtime's cost per op (target <= 10 us);
#   6. with two or more GPUs, the multi-GPU section: nccl_p2p_bench on 2 ranks (raw NCCL beside
#      the NcclTransport and host staging; the report judges the transport's bandwidth against raw
#      NCCL's at the largest message, target >= 0.9); exec_mpi_gpu_tests on 4 ranks with every
#      case's result kept (a case that cannot run for want of GPUs is reported skipped, not
#      passed); gpt-gpu on P x D = 4 x 2 ranks (4 to 7 GPUs: 2 x floor(GPUs / 2)) with every
#      schedule through step 3's loop (its prediction beside its measurement); a rank hung under
#      --timeout 10s, which passes when the job ends non-zero within its budget with one line
#      naming the op that timed out. With one GPU, each of its commands is printed, prefixed
#      "not run (...)", and recorded skipped; --dry-run prints them as the other steps.
# A step that fails is recorded and the rest still run (a step whose input is missing is
# recorded as failed). report.md holds every number and ends in "N passed, M failed"; beside it
# summary.json, devices.json, ctest-gpu.xml, exec-mpi-gpu.xml, the benchmarks' JSON, one folder
# per run and logs/. The report also checks, for every run, that every schedule was measured and
# that the flush schedules' losses are alike. Exit 0 only when M is 0.
#
# Budgets: each step runs under its own timeout, in seconds (--dry-run prints each beside its
# command, and their sums); GPU_CHECK_STEP_TIMEOUT replaces them all. Measured on one H200 on
# 2026-11-30 (docs/gpu-runs/2026-11-30-h200.md; the one-rank loops and cuda_bench on 2026-11-26
# and 2026-11-27) -> budget; simulate, compare, what-if and its compare take under a second,
# 3 each:
#   devices 1 -> 10;  ctest -L gpu 94 (51 tests) -> 120;
#   mlp-gpu, 2 ranks sharing one GPU: profile 51-60 -> 80, execute 71-79 -> 90 (182);
#   gpt-gpu, sharing: profile 18 -> 25, execute 30 -> 40 (77);
#   mlp-gpu-1rank: profile 13 -> 15, execute 12 -> 20 (41);  gpt-gpu-1rank: 5 -> 10, 5 -> 10 (26),
#   and its execute with step graphs, not yet run, estimated as its execute -> 10;
#   cuda_bench 94 (126 on an H100) -> 120, and BM_StepGraphs, not yet run, estimated 10 -> 130:
#   596 s in all, after the build: a 10-minute call (600 s) holds it on one GPU. The build is
#   not counted (scripts/build.sh first, in a call of its own, then --no-build).
# --long adds the layer probe (55; 44 measured), the MoE probe (60, not yet run), the attention
# probe (60, not yet run), the sustained GEMM (50, not yet run), the fused layer
# probe (300; never finished within a lease yet), the release's stage (240; 165 measured on an
# H100) and the PyTorch peer (400, not yet run). The multi-GPU
# section adds, not yet run, so estimated: nccl_p2p_bench 60, exec.mpi_gpu on 4 ranks 100 (it
# and exec.mpi_gpu_nccl took 62 of ctest's 74 s on one H200), the P x D loop 102 (profile 30,
# execute 60, 3 each), the hung rank 30 (deadline 10 s, the rest start-up): 292 s; with two or
# more GPUs the one-rank loops do not run, the scenarios' loops take a GPU per rank (mlp-gpu
# profile 50, execute 80: 142; gpt-gpu 20 and 35: 67), ctest -L gpu leaves exec_mpi_gpu_tests to
# the section (60), cuda_bench needs --long, and with 8 gpt-gpu's own loop is left to the 4 x 2
# one; gpt-gpu's pipeline on a GPU per rank runs again with step graphs (20, not yet run): 8 GPUs
# 10 + 60 + 142 + 292 = 504 s; 4-7 GPUs 10 + 60 + 142 + 67 + 20 + 292 = 591 s; 2-3 GPUs (no P x D
# loop) 489 s.
#
# --one-rank is gone: it skipped the loop of ranks sharing a GPU, which the simulator did not
# model and now does (pipeline.ranks_per_device), and the whole check fits a 10-minute call.
# Usage: scripts/gpu-check.sh [--dry-run] [--gpus N] [--no-build] [--long] [--build-dir DIR] [--out DIR]
#   --dry-run    print each step's command and budget, run nothing
#   --gpus N     with --dry-run, plan as for N GPUs (default 1)
#   --no-build   use the build in --build-dir as it is (default build/, built first)
#   --build-dir DIR  the build to check (default build/)
#   --out DIR    where the report and every output go (default BUILD/gpu-check)
#   --long       also the steps that do not fit a 10-minute call (the fused layer probe, the
#                Zero Bubble release's stage)
# GPU_CHECK_BENCH_FILTER (a Google Benchmark --benchmark_filter regex, default all) picks
# cuda_bench's benchmarks; GPU_CHECK_SKIP (an extended regex over the steps' names, as the report
# names them: "layer probe", "cuda_bench", "mlp-gpu: execute") leaves the steps it matches out,
# recorded skipped: a lease short of time spends it on the checks it is for.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build" out="" dry=0 do_build=1 long=0 plan_gpus=""
usage="usage: scripts/gpu-check.sh [--dry-run] [--gpus N] [--no-build] [--long] [--build-dir DIR] [--out DIR]"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --gpus) plan_gpus="${2:?--gpus N}"; shift ;;
    --no-build) do_build=0 ;;
    --long) long=1 ;;
    --build-dir) build="$(cd "${2:?--build-dir DIR}" && pwd)" || exit 2; shift ;;
    --out) out="${2:?--out DIR}"; shift ;;
    --one-rank) echo "gpu-check: --one-rank is gone: ranks sharing a GPU are modelled now (pipeline.ranks_per_device)," \
                     "and the whole check fits a 10-minute call" >&2; exit 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
if [[ -n $plan_gpus ]] && ! [[ $dry -eq 1 && $plan_gpus =~ ^[1-9][0-9]*$ ]]; then
  echo "gpu-check: --gpus N: a count of GPUs (1 or more), with --dry-run (a run counts its own)" >&2
  exit 2
fi
out="${out:-$build/gpu-check}"
sc="$build/cli/stagecraft"
bench="$build/tests/bench"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# How a step is shown instead of run: "" runs it; otherwise why it is not run (the multi-GPU
# section on one GPU). `planning` is true under --dry-run and there: the plan is printed whole.
not_run=""
planning() { [[ $dry -eq 1 || -n $not_run ]]; }
budget_all=0 budget_multi=0 in_multi=0

# planned NAME SECONDS COMMAND...: counts the step's budget; when the step is only planned,
# prints it (and, not run, records it skipped) and returns 0; a step GPU_CHECK_SKIP leaves out
# (left_out) returns 0 uncounted.
planned() {
  local name="$1" seconds="$2"; shift 2
  left_out "$name" && return 0
  budget_all=$((budget_all + seconds))
  [[ $in_multi -eq 1 ]] && budget_multi=$((budget_multi + seconds))
  if [[ $dry -eq 1 ]]; then
    printf '%s:' "$name"; printf ' %q' "$@"; printf '  # %d s\n' "$seconds"
  elif [[ -n $not_run ]]; then
    printf 'not run (%s): %s:' "$not_run" "$name"; printf ' %q' "$@"; echo
    printf '%s\tskip\t0\tnot run: %s\t\n' "$name" "$not_run" >>"$out/steps.tsv"
  else
    return 1
  fi
}
# record NAME STATUS START DETAIL LOG: a line of steps.tsv and one on the terminal.
record() {
  printf '%s\t%s\t%d\t%s\t%s\n' "$1" "$2" $((SECONDS - $3)) "$4" "$5" >>"$out/steps.tsv"
  printf '[%s] %s (%d s)\n' "$2" "$1" $((SECONDS - $3))
}
# left_out NAME: true when GPU_CHECK_SKIP (an extended regex over step names) names the step: it
# is recorded skipped (under --dry-run, printed so) and neither run nor counted in the budget.
left_out() {
  [[ -n ${GPU_CHECK_SKIP:-} && $1 =~ $GPU_CHECK_SKIP ]] || return 1
  if [[ $dry -eq 1 ]]; then printf '%s: left out (GPU_CHECK_SKIP)\n' "$1"
  else skipped "$1" "left out by GPU_CHECK_SKIP=$GPU_CHECK_SKIP"; fi
}
# step NAME SECONDS COMMAND...: runs COMMAND with SECONDS as its budget (its timeout), its output
# in logs/, and records pass or fail (or skip, when the command printed a line starting with
# SKIPPED) in steps.tsv.
step() {
  local name="$1" seconds="${GPU_CHECK_STEP_TIMEOUT:-$2}"; shift 2
  planned "$name" "$seconds" "$@" && return 0
  local log="logs/${name//[^A-Za-z0-9._-]/_}.log" start=$SECONDS rc status=pass detail=""
  timeout "$seconds" "$@" >"$out/$log" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    # ctest names its failed tests at the end; their output's first error may be one they expect.
    local failed_tests
    failed_tests="$(sed -n '/^The following tests FAILED:/,$s/^[[:space:]]*[0-9]* - \([^ ]*\) (.*/\1/p' "$out/$log" | paste -sd' ')"
    status=fail detail="exit $rc: $(grep -m1 'error' "$out/$log" | cut -c1-200)"
    [[ -n $failed_tests ]] && detail="exit $rc: failed: $(cut -c1-200 <<<"$failed_tests")"
    [[ $rc -eq 124 ]] && detail="timed out after $seconds s"
  elif grep -q '^SKIPPED' "$out/$log"; then
    status=skip detail="$(grep -m1 '^SKIPPED' "$out/$log" | cut -c1-200)"
  fi
  record "$name" "$status" "$start" "$detail" "$log"
  [[ $status != fail ]]
}
# hang_step NAME SECONDS COMMAND...: a job that must fail on a deadline: passes when COMMAND
# ends non-zero within SECONDS and prints exactly one error line naming an op (its name and
# step) that timed out.
hang_step() {
  local name="$1" seconds="${GPU_CHECK_STEP_TIMEOUT:-$2}"; shift 2
  planned "$name" "$seconds" "$@" && return 0
  local log="logs/${name//[^A-Za-z0-9._-]/_}.log" start=$SECONDS rc status=fail detail lines
  timeout "$seconds" "$@" >"$out/$log" 2>&1
  rc=$?
  lines="$(grep -E '^stagecraft: error: .* timed out' "$out/$log")"
  if [[ $rc -eq 0 ]]; then
    detail="exit 0: the hung rank went unnoticed"
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    detail="still running after $seconds s: the deadline did not end the job"
  elif [[ -z $lines ]]; then
    detail="exit $rc without a line saying what timed out: $(grep -m1 'error' "$out/$log" | cut -c1-160)"
  elif [[ $(wc -l <<<"$lines") -ne 1 ]]; then
    detail="exit $rc, $(wc -l <<<"$lines") lines saying what timed out, not one"
  elif ! grep -qE '[0-9]+[A-Z_]+[0-9]* \(step [0-9]+\)' <<<"$lines"; then
    detail="exit $rc, its line names no op: $(cut -c1-160 <<<"$lines")"
  else
    status=pass detail="exit $rc after $((SECONDS - start)) s: $(cut -c1-160 <<<"$lines")"
  fi
  record "$name" "$status" "$start" "$detail" "$log"
  [[ $status != fail ]]
}
# blocked NAME WHY: a step that cannot run, recorded as failed.
blocked() {
  left_out "$1" && return 0
  if ! planning; then
    printf '%s\tfail\t0\tnot run: %s\t\n' "$1" "$2" >>"$out/steps.tsv"
    printf '[fail] %s (not run: %s)\n' "$1" "$2"
  fi
}
# skipped NAME WHY: a step this run leaves out on purpose, recorded as skipped.
skipped() {
  if ! planning; then
    printf '%s\tskip\t0\t%s\t\n' "$1" "$2" >>"$out/steps.tsv"
    printf '[skip] %s (%s)\n' "$1" "$2"
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
  "$root/scripts/tool.sh" gpu_report "$out" >/dev/null
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
budget_all=10
if [[ $dry -eq 1 ]]; then
  printf 'devices: %q devices --json %q  # 10 s\n' "$sc" "$out/devices.json"
  gpus="${plan_gpus:-1}"
else
  timeout 10 "$sc" devices --json "$out/devices.json" >"$out/logs/devices.log" 2>&1
  devices_rc=$?
  if [[ $devices_rc -ne 0 ]]; then
    why="$(sed -n 's/^verdict: //p' "$out/logs/devices.log")"
    printf 'devices\tfail\t0\t%s\tlogs/devices.log\n' "${why:-$(head -c 200 "$out/logs/devices.log")}" >>"$out/steps.tsv"
    "$root/scripts/tool.sh" gpu_report "$out" >/dev/null
    echo "gpu-check: ${why:-stagecraft devices exited $devices_rc (see $out/logs/devices.log)}"
    exit "$devices_rc"
  fi
  gpus="$(grep -c '^GPU ' "$out/logs/devices.log")"
  printf 'devices\tpass\t0\t%s\tlogs/devices.log\n' "$gpus GPU(s)" >>"$out/steps.tsv"
fi

# ---- 2. the gpu tests ---------------------------------------------------------------------------
# With two or more GPUs exec_mpi_gpu_tests (ctest's exec.mpi_gpu and exec.mpi_gpu_nccl) runs in
# step 6, where each of its cases is reported.
without_mpi_gpu=()
(( gpus >= 2 )) && without_mpi_gpu=(-E '^exec\.mpi_gpu(_nccl)?$')
ctest_budget=120
(( gpus >= 2 )) && ctest_budget=60  # without exec_mpi_gpu_tests (62 of 74 s on one H200)
step "ctest -L gpu" $ctest_budget ctest --test-dir "$build" -L gpu "${without_mpi_gpu[@]}" --output-on-failure --timeout 90 \
  --no-tests=error \
  --output-junit "$out/ctest-gpu.xml"

# ---- 3. the core loop on the GPU scenarios ------------------------------------------------------
# core_loop NAME SCENARIO RANKS BUDGETS [ARGS...]: profile -> simulate -> execute -> compare of
# SCENARIO on RANKS processes (ARGS: --set overrides for every command), into $out/NAME, then the
# what-if and its compare. BUDGETS: the name of an array of the steps' budgets, in that order
# (six; four leave the what-if out).
core_loop() {
  local name="$1" scenario="$2" ranks="$3"; local -n b="$4"; shift 4
  local d="$out/$name" sets=("$@")
  planning || mkdir -p "$d"
  step "$name: profile" "${b[0]}" "$root/scripts/mpirun.sh" "$ranks" "$sc" profile "$scenario" "${sets[@]}" \
    --backend cuda --out "$d/profile.yaml"
  if planning || [[ -s "$d/profile.yaml" ]]; then
    step "$name: simulate" "${b[1]}" "$sc" simulate "$scenario" "${sets[@]}" --set model.profile="$d/profile.yaml" \
      --json "$d/predicted.json" --trace "$d/predicted.trace.json"
  else
    blocked "$name: simulate" "needs the profile"
  fi
  local with_profile=()
  if planning || [[ -s "$d/profile.yaml" ]]; then with_profile=(--set model.profile="$d/profile.yaml"); fi
  step "$name: execute" "${b[2]}" "$root/scripts/mpirun.sh" "$ranks" "$sc" execute "$scenario" "${sets[@]}" \
    --backend cuda "${with_profile[@]}" --json "$d/measured.json" --trace "$d/measured.trace.json"
  if planning || [[ -s "$d/predicted.json" && -s "$d/measured.json" ]]; then
    step "$name: compare" "${b[3]}" "$sc" compare "$d/predicted.json" "$d/measured.json" \
      --trace "$d/measured.trace.json" --json "$d/compare.json"
  else
    blocked "$name: compare" "needs predicted.json and measured.json"
  fi
  [[ ${#b[@]} -ge 6 ]] || return 0
  # What-if: the run's 1F1B alone predicts every schedule of the same run (replay --set), which
  # was executed minutes later on the same GPU.
  if planning || [[ -s "$d/measured.trace.1f1b.json" ]]; then
    step "$name: what-if" "${b[4]}" "$sc" replay "$d/measured.json" --trace "$d/measured.trace.1f1b.json" \
      --set pipeline.schedule=all --json "$d/whatif.json"
    if planning || [[ -s "$d/whatif.json" ]]; then
      step "$name: what-if compare" "${b[5]}" "$sc" compare "$d/whatif.json" "$d/measured.json" \
        --json "$d/whatif-compare.json"
    fi
  else
    blocked "$name: what-if" "needs the run's 1f1b trace"
  fi
}
# Budgets, seconds: profile, simulate, execute, compare[, what-if, what-if compare] (the header
# says where they come from).
# A GPU per rank, and ranks sharing GPUs (their kernels take turns: slower).
mlp_gpu_budget=(50 3 80 3 3 3) gpt_gpu_budget=(20 3 35 3 3 3)
mlp_gpu_shared_budget=(80 3 90 3 3 3) gpt_gpu_shared_budget=(25 3 40 3 3 3)
mlp_gpu_1rank_budget=(15 3 20 3) gpt_gpu_1rank_budget=(10 3 10 3)
for scenario in "$root/scenarios/mlp-gpu.yaml" "$root/scenarios/gpt-gpu.yaml"; do
  name="$(basename "$scenario" .yaml)"
  ranks="$("$root/scripts/tool.sh" scenario_ranks "$scenario")" || exit 1  # its pipeline.ranks; else one line why
  if (( gpus >= 8 )) && [[ $name == gpt-gpu ]]; then
    skipped "$name" "$gpus GPUs: the multi-GPU section's 4 x 2 loop runs gpt-gpu on a GPU per rank, with replicas"
  elif (( gpus >= ranks )); then
    core_loop "$name" "$scenario" "$ranks" "${name//-/_}_budget"
    # Its pipeline with step graphs over NCCL (execute --graphs on, issue 57: each rank's step
    # captured with its transfers): the report holds its 1F1B losses against the run above.
    if [[ $name == gpt-gpu ]]; then
      step "$name: execute, step graphs" 20 "$root/scripts/mpirun.sh" "$ranks" "$sc" execute "$scenario" \
        --set pipeline.schedule=1f1b --backend cuda --graphs on --json "$out/$name/measured-graphs.json"
    fi
  else
    # Fewer GPUs than ranks: K neighbouring ranks share each GPU (the executor's placement,
    # exec::GpuForLocalRank), and the simulator is told so, on a machine of the GPUs they use.
    per_device=$(( (ranks + gpus - 1) / gpus ))
    core_loop "$name" "$scenario" "$ranks" "${name//-/_}_shared_budget" --set pipeline.ranks_per_device=$per_device \
      --set topology.devices_per_node=$(( (ranks + per_device - 1) / per_device ))
    # One rank alone on a GPU: the cost model without the sharing (1F1B, 5 steps, to save time).
    core_loop "$name-1rank" "$scenario" 1 "${name//-/_}_1rank_budget" --set pipeline.ranks=1 \
      --set pipeline.schedule=1f1b --set pipeline.steps=5
    # The same one-rank run with its steps replayed from CUDA Graphs (execute --graphs on, issue
    # 57): the report holds its losses, step times and overhead per op against the run above.
    if [[ $name == gpt-gpu ]]; then
      step "$name-1rank: execute, step graphs" 10 "$sc" execute "$scenario" --set pipeline.ranks=1 \
        --set pipeline.schedule=1f1b --set pipeline.steps=5 --backend cuda --graphs on \
        --json "$out/$name-1rank/measured-graphs.json"
    fi
  fi
done

# ---- 4. the kernel list, kernel by kernel -------------------------------------------------------
# One block of each Zero Bubble paper model timed kernel by kernel with PyTorch, against the
# roofline model's prediction on this GPU's device file (issue 30, point 6; docs/cost-model.md).
# A characterisation of the device file rather than a check of the runtime (run on an H100 and
# an H200 so far): --long runs it. With two or more GPUs cuda_bench needs --long too: the
# multi-GPU section takes its time, and a machine of one GPU of the kind measures it.
if [[ $long -eq 1 ]]; then
  step "layer probe" 55 env STAGECRAFT="$sc" "$root/scripts/layer-probe.sh" --out "$out"
  # A MoE layer's expert GEMMs at 512 to 4,096 rows per expert against the model's grouped-GEMM
  # rate (issue 56 point 6; alone: scripts/moe-probe.sh, well under a minute).
  step "moe probe" 60 env STAGECRAFT="$sc" "$root/scripts/moe-probe.sh" --out "$out/moe-probe"
  # The same GEMMs in FP8 (torch._scaled_mm) against the FP8 peak the device file states.
  step "moe probe fp8" 60 env STAGECRAFT="$sc" "$root/scripts/moe-probe.sh" --dtype fp8 --out "$out/moe-probe-fp8"
  # Qwen3-30B-A3B's expert GEMMs as Megatron-Bridge's 16-GPU FP8 row runs them (8 local experts of
  # 4,096 rows, hidden 2048, width 768; docs/results/moe-published.md), in FP8 and bf16.
  step "moe probe, small experts" 60 env STAGECRAFT="$sc" "$root/scripts/moe-probe.sh" --dtype fp8 --hidden 2048 \
    --ffn 768 --cases 8x4096,8x2048 --out "$out/moe-probe-small"
  # The fused causal attention kernel (cuDNN's, FlashAttention-2) at 4K-32K tokens against the
  # model's flash_attention rate (docs/results/moe-published.md; alone: scripts/attention-probe.sh).
  step "attention probe" 60 env STAGECRAFT="$sc" "$root/scripts/attention-probe.sh" --out "$out/attention-probe"
  # A GEMM kept running for 30 s: whether the device file's burst rate holds at the power limit
  # (docs/results/moe-published.md; alone: scripts/gemm-sustain.sh).
  step "sustained gemm" 50 env STAGECRAFT="$sc" "$root/scripts/gemm-sustain.sh" --seconds 30 --out "$out/gemm-sustain"
else
  skipped "layer probe" "not in the 10-minute check: --long runs it (55 s)"
  skipped "moe probe" "not in the 10-minute check: --long runs it (60 s)"
  skipped "moe probe fp8" "not in the 10-minute check: --long runs it (60 s)"
  skipped "moe probe, small experts" "not in the 10-minute check: --long runs it (60 s)"
  skipped "attention probe" "not in the 10-minute check: --long runs it (60 s)"
  skipped "sustained gemm" "not in the 10-minute check: --long runs it (50 s)"
fi
if [[ $long -eq 1 ]]; then
  # The same blocks with the list's fused kernels as one kernel each (torch.compile): the rates
  # the device file's memory_kernels states for them.
  step "layer probe, fused" 300 env STAGECRAFT="$sc" "$root/scripts/layer-probe.sh" --out "$out/layer-probe-fused" \
    --fused
  # The Zero Bubble paper's own middle stage (its code release's Megatron-LM fork, Apex's
  # kernels), F / B / W timed with its own timers, with TorchScript's fuser on and off: whether
  # the fork's layer itself shows the profile's B ~ F (scripts/zb-fork-layer.sh; its two trees
  # are prepared once into build/zb-fork, not kept in the repository).
  zb_fork="${ZB_FORK_DIR:-$root/build/zb-fork}"
  if planning || [[ -d "$zb_fork/fork/megatron" ]]; then
    step "zero bubble release's stage" 240 env ZB_FORK_DIR="$zb_fork" STAGECRAFT="$sc" \
      "$root/scripts/zb-fork-layer.sh" --out "$out/zb-fork-layer.json"
  else
    skipped "zero bubble release's stage" "no $zb_fork (scripts/zb-fork-layer.sh --prepare ZB_GIT APEX_GIT)"
  fi
else
  skipped "layer probe, fused" "not in the 10-minute check: --long runs it (300 s)"
  skipped "zero bubble release's stage" "not in the 10-minute check: --long runs it (240 s)"
fi
# gpt-gpu on one rank beside PyTorch eager and torch.compile on this GPU (scripts/bench-gpu.sh's
# section 4, issue 57): one run of each, torch.compile's compile in its warm-up; the report
# shows its table. Not yet run on a GPU: the budget is an estimate (two ~20 s runs and a compile).
if [[ $long -eq 1 ]]; then
  step "PyTorch peer" 400 env STAGECRAFT="$sc" "$root/scripts/tool.sh" gpu_peer_bench 1
else
  skipped "PyTorch peer" "not in the 10-minute check: --long runs it (400 s)"
fi

# ---- 5. the GPU benchmark -----------------------------------------------------------------------
if [[ $long -eq 0 ]] && (( gpus >= 2 )); then
  skipped "cuda_bench" "$gpus GPUs: the multi-GPU section takes its time; --long runs it (130 s)"
elif planning || [[ -x "$bench/cuda_bench" ]]; then
  step "cuda_bench" 130 "$bench/cuda_bench" --benchmark_out="$out/cuda_bench.json" --benchmark_out_format=json \
    --benchmark_filter="${GPU_CHECK_BENCH_FILTER:-.}"
else
  blocked "cuda_bench" "$bench/cuda_bench was not built"
fi

# ---- 6. two or more GPUs ------------------------------------------------------------------------
# With one GPU, the section's commands are printed as they would run on 8 GPUs, and recorded as
# skipped.
in_multi=1
section_gpus=$gpus
if (( gpus < 2 )); then
  section_gpus=8
  [[ $dry -eq 1 ]] || not_run="$gpus GPU; the multi-GPU section needs 2 or more; as on 8 GPUs"
fi
# Raw NCCL point to point beside the executor's NcclTransport (and host staging), 2 ranks with a
# GPU each. Both ranks run every benchmark; each writes its own file, and rank 0's is kept.
if planning || [[ -x "$bench/nccl_p2p_bench" ]]; then
  step "nccl_p2p_bench" 60 "$root/scripts/mpirun.sh" 2 bash -c \
    'exec "$0" --benchmark_out="$1.$OMPI_COMM_WORLD_RANK.json" --benchmark_out_format=json' \
    "$bench/nccl_p2p_bench" "$out/nccl_p2p_bench"
  planning || { mv -f "$out/nccl_p2p_bench.0.json" "$out/nccl_p2p_bench.json" 2>/dev/null
                rm -f "$out"/nccl_p2p_bench.[0-9]*.json; }
else
  skipped "nccl_p2p_bench" "this build has no NCCL"
fi
# The runtime's reference cases on the cuda device, on 4 ranks as ctest runs them (exec.mpi_gpu),
# each case's result kept (gtest's XML, rank 0's): the report lists a case skipped for want of
# GPUs (NCCL needs a GPU per rank) as skipped.
if planning || [[ -x "$build/tests/exec_mpi_gpu_tests" ]]; then
  step "exec.mpi_gpu, 4 ranks" 100 "$root/scripts/mpirun.sh" 4 bash -c \
    'exec "$0" --gtest_output="xml:$1.$OMPI_COMM_WORLD_RANK.xml"' \
    "$build/tests/exec_mpi_gpu_tests" "$out/exec-mpi-gpu"
  planning || { mv -f "$out/exec-mpi-gpu.0.xml" "$out/exec-mpi-gpu.xml" 2>/dev/null
                rm -f "$out"/exec-mpi-gpu.[0-9]*.xml; }
else
  blocked "exec.mpi_gpu, 4 ranks" "$build/tests/exec_mpi_gpu_tests was not built"
fi
# gpt-gpu on P x D ranks, every schedule, through the core loop: its prediction beside its
# measurement; the report checks that the flush schedules' losses are alike.
(( world = section_gpus < 8 ? section_gpus : 8 ))
if (( world >= 8 )); then pp=4 dp=2; else pp=2 dp=$((world / 2)); fi
gpt_gpu_pd_budget=(30 3 60 3 3 3)
if (( dp >= 2 )); then
  core_loop "gpt-gpu-${pp}x${dp}" "$root/scenarios/gpt-gpu.yaml" $((pp * dp)) gpt_gpu_pd_budget \
    --set pipeline.ranks=$pp --set pipeline.data_parallel=$dp --set pipeline.schedule=all \
    --set topology.devices_per_node=$((pp * dp))
else
  skipped "gpt-gpu-${pp}x${dp}" "$gpus GPUs: no room for replicas; gpt-gpu's own loop (step 3) is its 2 x 1 run"
fi
# A rank that hangs at step 1: its peer's wait runs into --timeout 10s, which ends the job.
hang_step "a hung rank under --timeout" 30 "$root/scripts/mpirun.sh" 2 "$sc" execute "$root/scenarios/gpt-gpu.yaml" \
  --backend cuda --set pipeline.schedule=1f1b --set pipeline.steps=3 --inject-fault 1:1:hang --timeout 10s
not_run="" in_multi=0

if [[ $dry -eq 1 ]]; then
  echo "budget: $budget_all s in all, the multi-GPU section's $budget_multi s of it"
  exit 0
fi
echo "report: $out/report.md"
"$root/scripts/tool.sh" gpu_report "$out"
