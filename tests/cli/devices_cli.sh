#!/usr/bin/env bash
# `stagecraft devices` on whatever machine runs the tests (its answer is not known in advance,
# so each check holds for every answer): the exit code matches the JSON and the verdict line,
# --quiet prints nothing, CUDA_VISIBLE_DEVICES='' hides every GPU, `execute --backend cuda|auto`
# follow its verdict. Then scripts/gpu-check.sh: its plan (--dry-run), the report assembled from
# made-up step results, and, where no GPU is usable, the real thing: one line, devices' exit code.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
build="$(cd "$(dirname "$sc")/.." && pwd)"

# ---- stagecraft devices ---------------------------------------------------------------------------
"$sc" devices >"$tmp/out" 2>"$tmp/err"; rc=$?
echo "stagecraft devices: exit $rc"; cat "$tmp/out"
check "devices: a documented exit code" '[[ $rc -eq 0 || $rc -eq 3 || $rc -eq 4 || $rc -eq 5 ]]'
check "devices: nothing on stderr" '[[ ! -s "$tmp/err" ]]'
check "devices: the cpu backend first" '[[ "$(head -n1 "$tmp/out")" == "cpu backend: usable (OpenBLAS and MPI)" ]]'
check "devices: the verdict last" '[[ "$(tail -n1 "$tmp/out")" == "verdict: "* ]]'
says_usable=0 says_no_backend=0
[[ "$(tail -n1 "$tmp/out")" == "verdict: the cuda backend is usable here"* ]] && says_usable=1
[[ "$(sed -n 2p "$tmp/out")" == "cuda backend: not in this build"* ]] && says_no_backend=1
check "devices: usable exactly when exit 0" '[[ $says_usable -eq $((rc == 0)) ]]'
check "devices: exit 3 exactly when the build has no cuda backend" '[[ $says_no_backend -eq $((rc == 3)) ]]'

"$sc" devices --quiet >"$tmp/qout" 2>&1; qrc=$?
check "devices --quiet: same exit code ($qrc)" '[[ $qrc -eq $rc ]]'
check "devices --quiet: prints nothing" '[[ ! -s "$tmp/qout" ]]'

"$sc" devices --json "$tmp/d.json" >"$tmp/jout" 2>&1; jrc=$?
check "devices --json: same exit code and text" '[[ $jrc -eq $rc ]] && cmp -s "$tmp/out" "$tmp/jout"'
python3 - "$tmp/d.json" "$tmp/out" "$rc" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().splitlines()
rc = int(sys.argv[3])
ok = True
def need(cond, what):
    global ok
    if not cond: print("FAIL: devices --json:", what); ok = False
need(d["exit_code"] == rc, f"exit_code {d['exit_code']} is the exit code {rc}")
need(d["usable"] == (rc == 0), "usable agrees with the exit code")
need(d["status"] == {0: "usable", 3: "no_cuda_backend", 4: "no_gpu", 5: "unusable"}[rc], f"status {d['status']}")
need(d["lines"] == text, "lines are what it printed")
need(len(d["gpus"]) == sum(1 for l in text if l.startswith("GPU ")), "a GPU entry per GPU line")
need((d["reason"] == "") == (rc == 0), "a reason exactly when not usable")
need(d["reason"] in text[-1], "the reason is the verdict's")
need(d["backends"]["cpu"] and d["backends"]["cuda"] == (rc != 3), "backends")
sys.exit(0 if ok else 1)
PY

# No GPU can be seen through an empty CUDA_VISIBLE_DEVICES: "no GPU" (4), or 3 without a backend.
CUDA_VISIBLE_DEVICES= "$sc" devices >"$tmp/hout" 2>&1; hrc=$?
check "CUDA_VISIBLE_DEVICES='': no GPU (exit $hrc)" '[[ $hrc -eq 4 || ( $hrc -eq 3 && $rc -eq 3 ) ]]'
hidden="CUDA_VISIBLE_DEVICES: ''"
check "CUDA_VISIBLE_DEVICES='': it is named" '[[ $hrc -eq 3 ]] || grep -qxF -- "$hidden" "$tmp/hout"'
check "CUDA_VISIBLE_DEVICES='': no GPU listed" '! grep -q "^GPU [0-9]" "$tmp/hout"'

expect_error "devices: unknown flag" "--bogus" devices --bogus
mkdir -p "$tmp/dir"
expect_error "devices: --json to a folder" "--json $tmp/dir: cannot write: is a directory" devices --json "$tmp/dir"
"$sc" devices --json - >"$tmp/sout" 2>"$tmp/serr"
check "devices --json -: JSON on stdout, the text on stderr" \
  'python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$tmp/sout" && cmp -s "$tmp/serr" "$tmp/out"'

# ---- the executor follows the verdict -------------------------------------------------------------
scenario="$root/scenarios/mlp-cpu.yaml"
one=(--set pipeline.ranks=1 --set topology.devices_per_node=1 --set model.mlp.hidden=16 --set pipeline.steps=1
     --set pipeline.microbatches=2 --set pipeline.microbatch_size=4 --set pipeline.schedule=1f1b)
reason="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reason"])' "$tmp/d.json")"
if [[ $rc -ne 0 ]]; then
  expect_error "execute --backend cuda: the verdict's reason" "--backend cuda: $reason" execute "$scenario" \
    "${one[@]}" --backend cuda
fi
if [[ $rc -eq 3 || $rc -eq 4 ]]; then
  "$sc" execute "$scenario" "${one[@]}" --backend auto >"$tmp/aout" 2>"$tmp/aerr"; arc=$?
  check "execute --backend auto without a GPU: runs on the cpu" '[[ $arc -eq 0 ]] && grep -q "(cpu/mpi)" "$tmp/aout"'
  [[ $arc -eq 0 ]] || cat "$tmp/aerr"
elif [[ $rc -eq 5 ]]; then
  expect_error "execute --backend auto with an unusable GPU" "--backend auto: this machine has a GPU that this build cannot use: $reason" \
    execute "$scenario" "${one[@]}" --backend auto
fi

# ---- scripts/gpu-check.sh -------------------------------------------------------------------------
gc="$root/scripts/gpu-check.sh"
# plan FILE ARGS...: the --dry-run plan of a build as it is, into FILE.
plan() { local f="$1"; shift; "$gc" --dry-run --no-build --build-dir "$build" --out "$tmp/plan" "$@" >"$f" 2>&1; }
plan "$tmp/plan.txt"; prc=$?
check "gpu-check --dry-run: exit 0" '[[ $prc -eq 0 ]]'
check "gpu-check --dry-run: runs nothing" '[[ ! -e "$tmp/plan" ]]'
# One GPU (the default plan): each scenario's 2 ranks share it, as the simulator is told; then one
# rank alone; then the multi-GPU section's commands as on 8 GPUs.
for want in "devices: .*/cli/stagecraft devices --json" "ctest -L gpu: ctest --test-dir .* -L gpu --output-on-failure" \
            "mlp-gpu: profile: .*mpirun.sh 2 .* profile .*mlp-gpu.yaml --set pipeline.ranks_per_device=2 --set topology.devices_per_node=1 --backend cuda" \
            "mlp-gpu: simulate: .* simulate .*mlp-gpu.yaml --set pipeline.ranks_per_device=2 --set topology.devices_per_node=1 --set model.profile=" \
            "mlp-gpu: execute: .*mpirun.sh 2 .* execute .*mlp-gpu.yaml --set pipeline.ranks_per_device=2 --set topology.devices_per_node=1 --backend cuda" \
            "mlp-gpu: compare: " "gpt-gpu: profile: .*gpt-gpu.yaml --set pipeline.ranks_per_device=2 " "gpt-gpu: simulate: " \
            "gpt-gpu: execute: .*gpt-gpu.yaml --set pipeline.ranks_per_device=2 --set topology.devices_per_node=1 --backend cuda" \
            "gpt-gpu: compare: .* compare .*predicted.json .*measured.json --trace .*measured.trace.json" \
            "mlp-gpu: what-if: .* replay .*measured.json --trace .*measured.trace.1f1b.json --set pipeline.schedule=all" \
            "mlp-gpu: what-if compare: .* compare .*whatif.json .*measured.json" "gpt-gpu: what-if: " \
            "mlp-gpu-1rank: profile: .*mpirun.sh 1 .* profile .*mlp-gpu.yaml --set pipeline.ranks=1 --set pipeline.schedule=1f1b --set pipeline.steps=5 --backend cuda" \
            "gpt-gpu-1rank: execute: .*mpirun.sh 1 .* execute .*gpt-gpu.yaml --set pipeline.ranks=1 " "gpt-gpu-1rank: compare: " \
            "gpt-gpu-1rank: execute, step graphs: .* execute .*gpt-gpu.yaml --set pipeline.ranks=1 .*--graphs on --json .*gpt-gpu-1rank/measured-graphs.json" \
            "cuda_bench: .*cuda_bench --benchmark_out=" \
            "nccl_p2p_bench: .*mpirun.sh 2 bash -c .*nccl_p2p_bench " \
            "exec.mpi_gpu, 4 ranks: .*mpirun.sh 4 bash -c .*gtest_output=.*exec_mpi_gpu_tests " \
            "gpt-gpu-4x2: profile: .*mpirun.sh 8 .* profile .*gpt-gpu.yaml --set pipeline.ranks=4 --set pipeline.data_parallel=2 --set pipeline.schedule=all --set topology.devices_per_node=8 --backend cuda" \
            "gpt-gpu-4x2: simulate: .* simulate .*gpt-gpu.yaml --set pipeline.ranks=4 --set pipeline.data_parallel=2 " \
            "gpt-gpu-4x2: execute: .*mpirun.sh 8 .* execute .*gpt-gpu.yaml --set pipeline.ranks=4 --set pipeline.data_parallel=2 " \
            "gpt-gpu-4x2: compare: .* compare .*gpt-gpu-4x2/predicted.json .*gpt-gpu-4x2/measured.json" \
            "gpt-gpu-4x2: what-if compare: " \
            "a hung rank under --timeout: .*mpirun.sh 2 .* execute .*gpt-gpu.yaml --backend cuda .*--inject-fault 1:1:hang --timeout 10s"; do
  check "gpu-check --dry-run: a step '$want'" 'grep -q "^$want" "$tmp/plan.txt"'
done
# The loops: mlp-gpu and gpt-gpu 6 steps each, their one-rank loops 4 each and gpt-gpu's one-rank
# execute with step graphs; devices, ctest, cuda_bench; the multi-GPU section's 9; and the budget
# line.
check "gpu-check --dry-run: 33 steps without the build, and the budgets" '[[ $(wc -l <"$tmp/plan.txt") -eq 34 ]]'
check "gpu-check --dry-run: each step with its budget" '[[ $(grep -cE "  # [0-9]+ s$" "$tmp/plan.txt") -eq 33 ]]'
check "gpu-check --dry-run: not the --long steps" '! grep -q "^layer probe: \|^moe probe: \|^moe probe fp8: \|^moe probe, small experts: \|^attention probe: \|^sustained gemm: \|^layer probe, fused: \|^zero bubble release" "$tmp/plan.txt"'
# The budgets: their sum is the one stated, and a one-GPU machine's (all but the multi-GPU section)
# fits a 10-minute call.
read -r all multi < <(sed -n 's/^budget: \([0-9]*\) s in all, the multi-GPU section.s \([0-9]*\) s of it$/\1 \2/p' "$tmp/plan.txt")
summed=$(sed -n 's/.*  # \([0-9]*\) s$/\1/p' "$tmp/plan.txt" | paste -sd+ | bc)
multi_summed=$(sed -n '/^nccl_p2p_bench: /,$s/.*  # \([0-9]*\) s$/\1/p' "$tmp/plan.txt" | paste -sd+ | bc)
check "gpu-check --dry-run: the budgets' sum stated ($all = $summed, $multi = $multi_summed)" \
  '[[ -n "$all" && $all -eq $summed && $multi -eq $multi_summed ]]'
check "gpu-check --dry-run: one GPU's steps fit 600 s ($((all - multi)) s)" '[[ $((all - multi)) -le 600 ]]'
check "gpu-check: the header states the same sums" \
  'grep -q "^#   $((all - multi)) s in all, after the build" "$gc" && grep -q "^# .*the hung rank [0-9]* .*: $multi s;" "$gc"'
# With two or more GPUs every planned step runs, and the whole plan fits a 10-minute call.
for g in 2 4 8; do
  plan "$tmp/plan-g$g.txt" --gpus $g
  g_all=$(sed -n 's/^budget: \([0-9]*\) s in all.*/\1/p' "$tmp/plan-g$g.txt")
  check "gpu-check --dry-run --gpus $g: the whole check fits 600 s ($g_all s)" '[[ -n "$g_all" && $g_all -le 600 ]]'
done
plan "$tmp/plan-long.txt" --long
for want in "layer probe: .*scripts/layer-probe.sh --out .*  # 55 s" \
            "moe probe: .*scripts/moe-probe.sh --out .*moe-probe  # 60 s" \
            "moe probe fp8: .*scripts/moe-probe.sh --dtype fp8 --out .*moe-probe-fp8  # 60 s" \
            "moe probe, small experts: .*scripts/moe-probe.sh --dtype fp8 --hidden 2048 --ffn 768 --cases 8x4096.*8x2048 --out .*moe-probe-small  # 60 s" \
            "attention probe: .*scripts/attention-probe.sh --out .*attention-probe  # 60 s" \
            "sustained gemm: .*scripts/gemm-sustain.sh --seconds 30 --out .*gemm-sustain  # 50 s" \
            "layer probe, fused: .*scripts/layer-probe.sh --out .*layer-probe-fused --fused  # 300 s" \
            "zero bubble release's stage: .*scripts/zb-fork-layer.sh --out .*zb-fork-layer.json  # 240 s"; do
  check "gpu-check --dry-run --long: a step '$want'" 'grep -q "^$want" "$tmp/plan-long.txt"'
done
# Eight GPUs: a GPU per rank (no sharing, no one-rank loops), exec.mpi_gpu in the section alone;
# four: P x D = 2 x 2; two: no replicas, so no P x D loop.
plan "$tmp/plan8.txt" --gpus 8
check "gpu-check --dry-run --gpus 8: a GPU per rank" \
  '! grep -q "ranks_per_device\|-1rank: " "$tmp/plan8.txt" && grep -q "^mlp-gpu: execute: .*mpirun.sh 2 .*mlp-gpu.yaml --backend cuda" "$tmp/plan8.txt"'
check "gpu-check --dry-run --gpus 8: ctest without exec.mpi_gpu" "grep -qF \"ctest -L gpu: ctest --test-dir $build -L gpu -E \" \"\$tmp/plan8.txt\""
check "gpu-check --dry-run --gpus 8: the section as on one GPU" \
  '[[ "$(sed -n "/^nccl_p2p_bench: /,/^a hung rank/p" "$tmp/plan8.txt")" == "$(sed -n "/^nccl_p2p_bench: /,/^a hung rank/p" "$tmp/plan.txt")" ]]'
plan "$tmp/plan4.txt" --gpus 4
check "gpu-check --dry-run --gpus 4: P x D = 2 x 2" \
  'grep -q "^gpt-gpu-2x2: execute: .*mpirun.sh 4 .*--set pipeline.ranks=2 --set pipeline.data_parallel=2 .*devices_per_node=4 " "$tmp/plan4.txt"'
plan "$tmp/plan2.txt" --gpus 2
check "gpu-check --dry-run --gpus 2: no P x D loop" '! grep -q "^gpt-gpu-[0-9]x" "$tmp/plan2.txt" && grep -q "^a hung rank" "$tmp/plan2.txt"'
"$gc" --dry-run --out "$tmp/plan" | head -n1 >"$tmp/first"
check "gpu-check --dry-run: builds first" 'grep -q "^build: .*scripts/build.sh" "$tmp/first"'
"$gc" --bogus >/dev/null 2>"$tmp/usage"
check "gpu-check: a bad flag exits 2" '[[ $? -eq 2 ]]'
"$gc" --one-rank >/dev/null 2>"$tmp/onerank"
check "gpu-check --one-rank: exit 2, gone, and why" '[[ $? -eq 2 ]] && grep -q "^gpu-check: --one-rank is gone: ranks sharing a GPU are modelled now" "$tmp/onerank"'
for bad in "--gpus 2" "--dry-run --gpus 0" "--dry-run --gpus x"; do
  "$gc" $bad --no-build --out "$tmp/nogpus" >/dev/null 2>&1
  check "gpu-check $bad: exit 2" '[[ $? -eq 2 && ! -e "$tmp/nogpus" ]]'
done
# The header's usage is the one a bad flag prints, each of its options is described below it, and
# each option the script reads is in it.
header_usage="$(sed -n 's/^# Usage: //p' "$gc")"
check "gpu-check: the header's usage is the one printed ($header_usage)" '[[ "usage: $header_usage" == "$(cat "$tmp/usage")" ]]'
for opt in $(grep -o -- '--[a-z-]*' <<<"$header_usage"); do
  check "gpu-check: the header describes $opt" 'grep -qE "^#   $opt( |$)" "$gc"'
done
for opt in $(sed -n 's/^    \(--[a-z-]*\)).*/\1/p' "$gc"); do
  [[ $opt == --one-rank ]] || check "gpu-check: $opt is in the usage" 'grep -q -- "\[$opt[] ]" <<<"$header_usage"'
done
# No driver, no GPU: said at once, before any build (the build takes 10+ minutes on two cores):
# exit 4, one line, and the build folder untouched.
mkdir -p "$tmp/nobuild"
GPU_CHECK_DRIVER_PATHS="$tmp/no-such-device" timeout 120 "$gc" --build-dir "$tmp/nobuild" --out "$tmp/gc-nodriver" \
  >"$tmp/nodriver.txt" 2>&1
check "gpu-check without a driver: exit 4 (got $?)" '[[ $? -eq 4 ]]'
check "gpu-check without a driver: one line saying so" \
  '[[ $(wc -l <"$tmp/nodriver.txt") -eq 1 ]] && grep -q "^gpu-check: no GPU: no NVIDIA driver .*nothing was built" "$tmp/nodriver.txt"'
check "gpu-check without a driver: nothing built" '[[ -z "$(ls -A "$tmp/nobuild")" ]]'
check "gpu-check without a driver: the report says why" 'grep -q "no NVIDIA driver" "$tmp/gc-nodriver/steps.tsv"'

# Runs on made-up builds: `stagecraft devices` reports FAKE_GPUS usable GPUs, the other commands
# note their arguments and fail, but an execute with a hung rank ends as a deadline ends it (with
# FAKE_HANG=line; quiet: without a word); an
# mpirun runs its command once as rank 0; the benchmarks write made-up results.
fb="$tmp/fakebuild"; mkdir -p "$fb/cli" "$fb/tests/bench" "$tmp/fakebin"
cat >"$fb/cli/stagecraft" <<'SH'
#!/usr/bin/env bash
if [[ "$1" != devices ]]; then
  echo "$*" >>"$FAKE_ARGS"
  if [[ $FAKE_HANG == line && " $* " == *" --inject-fault 1:1:hang "* ]]; then
    echo "stagecraft: rank 1 hangs at step 1 (--inject-fault)" >&2
    echo "stagecraft: error: rank 0 (vm): 0RECV_B8 (step 1) from rank 1 timed out: the NCCL receive did not complete within 10 s" >&2
  fi
  exit 1
fi
for ((g = 0; g < FAKE_GPUS; g++)); do echo "GPU $g: Made Up, 80.00 GiB, compute capability 9.0: usable"; done
echo "verdict: the cuda backend is usable here ($FAKE_GPUS GPU(s))"
[[ "${2:-}" == --json ]] && echo '{}' >"$3"
exit 0
SH
cat >"$fb/tests/bench/nccl_p2p_bench" <<'SH'
#!/usr/bin/env bash
cat >"${1#--benchmark_out=}" <<'JSON'
{"benchmarks": [{"name": "BM_SendRecv/path:0/bytes:268435456/iterations:40/manual_time", "bytes_per_second": 4.0e11},
 {"name": "BM_SendRecv/path:1/bytes:268435456/iterations:40/manual_time", "bytes_per_second": 3.8e11}]}
JSON
SH
cat >"$fb/tests/exec_mpi_gpu_tests" <<'SH'
#!/usr/bin/env bash
cat >"${1#--gtest_output=xml:}" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="2" failures="0">
  <testsuite name="Generators/EveryScheduleOverNccl" tests="2">
    <testcase name="MatchesReference/1f1b" status="run" result="skipped" classname="Generators/EveryScheduleOverNccl">
      <skipped message="tests/exec/runtime_mpi.cpp:566&#x0A;Skipped&#x0A;NCCL needs a GPU per rank: 4 ranks, 2 GPU(s)"/>
    </testcase>
    <testcase name="MatchesReference/gpipe" status="run" result="completed" classname="Generators/EveryScheduleOverNccl"/>
  </testsuite>
</testsuites>
XML
SH
cat >"$tmp/fakebin/mpirun" <<'SH'
#!/usr/bin/env bash
while [[ $# -gt 0 ]]; do case "$1" in -np|--bind-to) shift 2 ;; --*) shift ;; *) break ;; esac; done
OMPI_COMM_WORLD_RANK=0 exec "$@"
SH
chmod +x "$fb/cli/stagecraft" "$fb/tests/bench/nccl_p2p_bench" "$fb/tests/exec_mpi_gpu_tests" "$tmp/fakebin/mpirun"
# fake_run NAME GPUS [HANG]: gpu-check on the made-up build with GPUS GPUs, into $tmp/gc-NAME.
fake_run() {
  : >"$tmp/args-$1"
  FAKE_GPUS=$2 FAKE_HANG="${3:-line}" FAKE_ARGS="$tmp/args-$1" PATH="$tmp/fakebin:$PATH" PYTHON=/nonexistent \
    "$gc" --no-build --build-dir "$fb" --out "$tmp/gc-$1" >"$tmp/gc-$1.txt" 2>&1
}
# One GPU: the 2-rank loops run their ranks on it, as modelled (every command told so); the one-rank
# loops; and the multi-GPU section printed, exactly as --dry-run plans it, and recorded skipped.
fake_run one 1
check "gpu-check, 1 GPU: the 2-rank loops run, sharing the GPU" \
  '[[ $(grep -cP "^(mlp|gpt)-gpu: profile\t" "$tmp/gc-one/steps.tsv") -eq 2 ]] &&
   [[ $(grep -c "^\(profile\|execute\|simulate\) .*-gpu.yaml --set pipeline.ranks_per_device=2 --set topology.devices_per_node=1 " "$tmp/args-one") -eq 4 ]]'
check "gpu-check, 1 GPU: the one-rank loops run, 1F1B" \
  '[[ $(grep -cP "^(mlp|gpt)-gpu-1rank: profile\t" "$tmp/gc-one/steps.tsv") -eq 2 ]] &&
   [[ $(grep -c "^profile .*-gpu.yaml --set pipeline.ranks=1 --set pipeline.schedule=1f1b " "$tmp/args-one") -eq 2 ]]'
"$gc" --dry-run --no-build --build-dir "$fb" --out "$tmp/gc-one" | sed -n '/^nccl_p2p_bench: /,/^a hung rank/s/  # [0-9]* s$//p' \
  >"$tmp/one-planned"
sed -n 's/^not run (1 GPU; the multi-GPU section needs 2 or more; as on 8 GPUs): //p' "$tmp/gc-one.txt" >"$tmp/one-printed"
check "gpu-check, 1 GPU: the multi-GPU section printed as planned, not run ($(wc -l <"$tmp/one-printed") lines)" \
  '[[ $(wc -l <"$tmp/one-planned") -eq 9 ]] && cmp -s "$tmp/one-planned" "$tmp/one-printed"'
check "gpu-check, 1 GPU: the multi-GPU section recorded skipped, why" \
  '[[ $(grep -cP "\tskip\t0\tnot run: 1 GPU; the multi-GPU section needs 2 or more; as on 8 GPUs\t" "$tmp/gc-one/steps.tsv") -eq 9 ]] &&
   ! grep -q "4x2\|inject-fault" "$tmp/args-one" && [[ ! -e "$tmp/gc-one/gpt-gpu-4x2" && ! -e "$tmp/gc-one/nccl_p2p_bench.json" ]]'
check "gpu-check, 1 GPU: the --long steps recorded skipped" \
  '[[ $(grep -cP "^(layer probe|moe probe|moe probe fp8|moe probe, small experts|sustained gemm|layer probe, fused|zero bubble release.s stage)\tskip\t0\tnot in the 10-minute check: --long runs it" "$tmp/gc-one/steps.tsv") -eq 7 ]]'
# Eight GPUs: a GPU per rank, no one-rank loop, and the multi-GPU section run: the benchmark's
# ratio and the tests' skipped case in the report, P x D = 4 x 2, and the hung rank's deadline.
fake_run eight 8
check "gpu-check, 8 GPUs: no sharing, no one-rank loop" \
  '! grep -q "ranks_per_device" "$tmp/args-eight" && ! grep -q "1rank" "$tmp/gc-eight/steps.tsv"'
check "gpu-check, 8 GPUs: the P x D loop ran" \
  'grep -q "^profile .*gpt-gpu.yaml --set pipeline.ranks=4 --set pipeline.data_parallel=2 --set pipeline.schedule=all --set topology.devices_per_node=8 --backend cuda" "$tmp/args-eight"'
check "gpu-check, 8 GPUs: rank 0's results kept" \
  '[[ -s "$tmp/gc-eight/nccl_p2p_bench.json" && -s "$tmp/gc-eight/exec-mpi-gpu.xml" ]] && [[ -z "$(find "$tmp/gc-eight" -maxdepth 1 -name "*.0.*")" ]]'
check "gpu-check, 8 GPUs: the hung rank passes on its one line" \
  'grep -qP "^a hung rank under --timeout\tpass\t[0-9]+\texit 1 after [0-9]+ s: stagecraft: error: rank 0 \(vm\): 0RECV_B8 \(step 1\)" "$tmp/gc-eight/steps.tsv"'
for want in "| NcclTransport at least 0.9 of raw NCCL's bandwidth (within 10%, largest message) | PASS |  | 0.950 at 268435456 bytes (380.00 / 400.00 GB/s) |" \
            "| 268435456 | 400.00 | 380.00 | - | 0.950 |" \
            "| exec.mpi_gpu, 4 ranks: 1 case(s) skipped | skipped |  | NCCL needs a GPU per rank: 4 ranks, 2 GPU(s): Generators/EveryScheduleOverNccl.MatchesReference/1f1b |" \
            "1 passed, 0 failed, 1 skipped"; do
  check "gpu-check, 8 GPUs: the report has '$want'" 'grep -qF -- "$want" "$tmp/gc-eight/report.md"'
done
# Two GPUs: no room for replicas, so no P x D loop; and a hung rank whose deadline says nothing
# fails its step.
fake_run two 2 quiet
check "gpu-check, 2 GPUs: no P x D loop, and why" \
  'grep -qP "^gpt-gpu-2x1\tskip\t0\t2 GPUs: no room for replicas" "$tmp/gc-two/steps.tsv" && ! grep -q "data_parallel" "$tmp/args-two"'
check "gpu-check, 2 GPUs: a hung rank without its line fails" \
  'grep -qP "^a hung rank under --timeout\tfail\t[0-9]+\texit 1 without a line saying what timed out" "$tmp/gc-two/steps.tsv"'

# The report from made-up results: the numbers in, the checks derived, the closing line counted.
fake="$tmp/fake"; mkdir -p "$fake/mlp-gpu" "$fake/logs"
printf '%s\n' "build	pass	100	" "devices	pass	0	1 GPU(s)	logs/devices.log" "ctest -L gpu	pass	300	" \
  "mlp-gpu: profile	pass	20	" "mlp-gpu: simulate	pass	1	" "mlp-gpu: execute	fail	30	exit 1: boom" \
  "mlp-gpu: compare	fail	0	not run: needs predicted.json and measured.json" "cuda_bench	pass	60	" \
  "nccl_p2p_bench	skip	1	SKIPPED: needs 2 MPI ranks with a GPU each" >"$fake/steps.tsv"
cat >"$fake/ctest-gpu.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="gpu" tests="2" failures="0" disabled="0" skipped="1">
  <testcase name="exec.mpi_gpu" status="run"/>
  <testcase name="cli.execute_gpu_cli" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/></testcase>
</testsuite>
XML
cat >"$fake/mlp-gpu/compare.json" <<'JSON'
{"schedules": [{"schedule": "1f1b", "step_time_ms": {"predicted": 10.0, "measured": 12.5, "error_pct": -20.0},
  "bubble_fraction": {"predicted": 0.1, "measured": 0.12, "error_pp": -2.0},
  "cost_drift_pct": -18.0, "model_error_pct": -2.0}],
 "only_in_predicted": ["zb-v"], "only_in_measured": []}
JSON
cat >"$fake/mlp-gpu/whatif-compare.json" <<'JSON'
{"schedules": [{"schedule": "1f1b", "step_time_ms": {"predicted": 12.0, "measured": 12.5, "error_pct": -3.5},
  "bubble_fraction": {"predicted": 0.1, "measured": 0.12, "error_pp": -2.0}}], "only_in_predicted": [], "only_in_measured": []}
JSON
cat >"$fake/cuda_bench.json" <<'JSON'
{"benchmarks": [
 {"name": "BM_LayerOpVsCublas/op:0/precision:1/stepped:1/manual_time", "TFLOPS": 400.0, "cublas_TFLOPS": 450.0, "of_cublas": 0.889},
 {"name": "BM_LayerOpVsCublas/op:2/precision:2/stepped:1/manual_time", "TFLOPS": 300.0, "cublas_TFLOPS": 545.5, "of_cublas": 0.55},
 {"name": "BM_LayerOpVsCublas/op:2/precision:2/stepped:0/manual_time", "TFLOPS": 100.0, "cublas_TFLOPS": 500.0, "of_cublas": 0.2},
 {"name": "BM_RuntimeOverheadPerOp/cuda:1/manual_time", "us_per_op": 31.3, "math_us_per_op": 27.05, "runtime_us_per_op": 4.25, "us_per_op_with_setup": 33.0},
 {"name": "BM_RuntimeOverheadPerOp/cuda:0/manual_time", "us_per_op": 0.74},
 {"name": "BM_CudaCallCost/call:0/manual_time", "us_per_call_issued": 1.5, "us_per_call": 1.75, "label": "event record (op clock stamp)"}]}
JSON
cat >"$fake/nccl_p2p_bench.json" <<'JSON'
{"benchmarks": [
 {"name": "BM_SendRecv/path:0/bytes:268435456/iterations:40/manual_time", "bytes_per_second": 3.5e11},
 {"name": "BM_SendRecv/path:2/bytes:268435456/iterations:40/manual_time", "bytes_per_second": 2.0e10}]}
JSON
cat >"$fake/zb-fork-layer.compare.json" <<'JSON'
{"device": "X-FILE", "models": {"1.5B/fused": {"measured_ms": {"F": 3.0, "B": 3.1, "W": 1.5},
 "predicted_ms": {"F": 2.0, "B": 2.5, "W": 0.8}}}}
JSON
printf '# The kernel list against NVIDIA X\n\n| model | F meas / pred |\n' >"$fake/layer-probe.md"
mkdir -p "$fake/layer-probe-fused"
printf '# The kernel list against NVIDIA X (fused)\n\n| 1.5B | 2.4 / 2.3 |\n' >"$fake/layer-probe-fused/layer-probe.md"
cat >"$fake/zb-fork-layer.json" <<'JSON'
{"device": "NVIDIA X", "torch": "9.9", "built": ["scaled_upper_triang_masked_softmax_cuda (60 s)"],
 "layer_norm": "PyTorch's layer_norm", "models": {"1.5B/fused": {"layers": 3, "jit": "fused",
 "fuser": "TorchScript's fuser (NNC) on", "softmax_fused": true, "mean_ms": {"F": 3.0, "B": 3.1, "W": 1.5},
 "b_over_f": 1.0333, "w_over_f": 0.5, "paper_b_over_f": 0.9765, "paper_w_over_f": 0.5038}}}
JSON
"$root/scripts/tool.sh" gpu_report "$fake" >"$tmp/rout" 2>&1; rrc=$?
# Steps: 6 pass, 2 fail, 1 skip. Checks: a gpu test skipped (fail), zb-v not measured (fail),
# W bf16 at 0.55 of cuBLAS in the steady state (fail; its first step's 0.2 is shown, not judged),
# the run's 31.3 us per op (fail), the runtime's own 4.25 us of it (pass).
check "report: exit 1 with failures" '[[ $rrc -eq 1 ]]'
check "report: prints the closing line" '[[ "$(cat "$tmp/rout")" == "7 passed, 6 failed" ]]'
check "report: report.md ends with it" '[[ "$(tail -n1 "$fake/report.md")" == "7 passed, 6 failed" ]]'
check "report: the skipped step counted apart" 'grep -qx "1 skipped" "$fake/report.md"'
for want in "| mlp-gpu: execute | FAIL | 30 s | exit 1: boom |" "| nccl_p2p_bench | skipped |" \
            "| no gpu test skipped on a usable GPU | FAIL |  | 1 skipped: cli.execute_gpu_cli |" \
            "| mlp-gpu: every schedule measured | FAIL |  | not measured: zb-v |" \
            "| 1f1b | 10.000 | 12.500 | -20.0% | -18.0% | -2.0% | -3.5% | 10.0% | 12.0% |" "| F | tf32 | steady | 400.0 | 450.0 | 0.889 |" \
            "| W | bf16 | steady | 300.0 | 545.5 | 0.550 |" "| W | bf16 | first step | 100.0 | 500.0 | 0.200 |" "worst W bf16: 0.550" "| cuda | 31.30 | 27.05 | 4.25 | 33.00 |" "| cpu | 0.74 | - | - | - |" \
            "| runtime overhead at most 10 us per op on the GPU | FAIL |  | 31.30 us |" \
            "| the runtime's own part at most 10 us per op on the GPU (the run less its ops' math) | PASS |  | 4.25 us (its ops' math alone 27.05) |" \
            "| event record (op clock stamp) | 1.50 | 1.75 |" \
            "| 268435456 | 350.00 | - | 20.00 |" "1 passed, 0 failed, 1 skipped" \
            "## The kernel list against NVIDIA X" "| model | F meas / pred |" \
            "## The kernel list against NVIDIA X (fused)" "| 1.5B | 2.4 / 2.3 |" \
            "| 1.5B | TorchScript's fuser (NNC) on | 3 | Apex fused | 3.000 | 3.100 | 1.500 | 1.033 / 1.250 / 0.977 | 0.500 / 0.400 / 0.504 |"; do
  check "report: has '$want'" 'grep -qF -- "$want" "$fake/report.md"'
done
check "report: summary.json counts" \
  'python3 -c "import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if (s[\"passed\"],s[\"failed\"],s[\"skipped\"])==(7,6,1) else 1)" "$fake/summary.json"'
# Everything passing: exit 0.
printf '%s\n' "devices	pass	0	1 GPU(s)" "cuda_bench	pass	60	" >"$fake/steps.tsv"
rm -f "$fake/ctest-gpu.xml" "$fake/mlp-gpu/compare.json" "$fake/nccl_p2p_bench.json"
sed -i 's/"of_cublas": 0.889/"of_cublas": 0.92/; s/"of_cublas": 0.55/"of_cublas": 0.95/; s/"us_per_op": 31.3, "math_us_per_op": 27.05,/"us_per_op": 8.5, "math_us_per_op": 4.25,/' \
  "$fake/cuda_bench.json"
"$root/scripts/tool.sh" gpu_report "$fake" >"$tmp/rout" 2>&1; rrc=$?
check "report: all passed, exit 0 ($(cat "$tmp/rout"))" '[[ $rrc -eq 0 && "$(cat "$tmp/rout")" == "5 passed, 0 failed" ]]'
# A cuda_bench without the math's baseline (an older build's): the whole run's check alone.
sed -i 's/"us_per_op": 8.5, "math_us_per_op": 4.25, "runtime_us_per_op": 4.25,/"us_per_op": 8.5,/' "$fake/cuda_bench.json"
"$root/scripts/tool.sh" gpu_report "$fake" >"$tmp/rout" 2>&1; rrc=$?
check "report: no baseline, the whole run's check alone ($(cat "$tmp/rout"))" \
  '[[ $rrc -eq 0 && "$(cat "$tmp/rout")" == "4 passed, 0 failed" ]] && ! grep -q "the runtime.s own part" "$fake/report.md"'

# A benchmark run with repetitions: its median (Google Benchmark's aggregate) is judged and shown,
# with the repetitions' range; neither the repetitions nor the other aggregates are rows of their
# own. The median (9.5) is neither the first, the last, the largest nor the mean; a benchmark
# run once (the cpu device's) is shown as it ran; a repetition that failed is reported as failed.
python3 - "$fake/cuda_bench.json" <<'PY'
import json, sys
name = "BM_RuntimeOverheadPerOp/cuda:1/repeats:3/manual_time"
rep = lambda us, math, **kw: dict({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 3,
                                   "us_per_op": us, "math_us_per_op": math, "runtime_us_per_op": us - math}, **kw)
agg = lambda kind, us, math: dict(rep(us, math), name=name + "_" + kind, run_type="aggregate", aggregate_name=kind)
once = {"name": "BM_RuntimeOverheadPerOp/cuda:0/manual_time", "run_name": "BM_RuntimeOverheadPerOp/cuda:0/manual_time",
        "run_type": "iteration", "repetitions": 1, "us_per_op": 0.7}
runs = [rep(12.0, 4.0), rep(9.5, 3.5), rep(9.0, 3.0), agg("mean", 10.17, 3.5), agg("median", 9.5, 3.5),
        agg("stddev", 1.6, 0.5), agg("cv", 0.16, 0.14), once]
json.dump({"benchmarks": runs}, open(sys.argv[1], "w"))
runs[0] = rep(0, 0, error_occurred=True, error_message="cudaErrorLaunchFailure")
json.dump({"benchmarks": runs}, open(sys.argv[1] + ".failed", "w"))
PY
"$root/scripts/tool.sh" gpu_report "$fake" >"$tmp/rout" 2>&1; rrc=$?
check "report: repetitions, the median judged ($(cat "$tmp/rout"))" \
  '[[ $rrc -eq 0 && "$(cat "$tmp/rout")" == "4 passed, 0 failed" ]]'
for want in "| cuda | 9.50 (9.00-12.00) | 3.50 (3.00-4.00) | 6.00 (6.00-8.00) | - |" "| cpu | 0.70 | - | - | - |" \
            "Each the median of 3 repetitions (their range in brackets)." \
            "| runtime overhead at most 10 us per op on the GPU | PASS |  | 9.50 us |"; do
  check "report: repetitions, has '$want'" 'grep -qF -- "$want" "$fake/report.md"'
done
check "report: repetitions, one row each" '[[ $(grep -c "^| cuda |" "$fake/report.md") -eq 1 && $(grep -c "^| cpu |" "$fake/report.md") -eq 1 ]]'
mv "$fake/cuda_bench.json.failed" "$fake/cuda_bench.json"
"$root/scripts/tool.sh" gpu_report "$fake" >"$tmp/rout" 2>&1; rrc=$?
check "report: a failed repetition fails the report ($(cat "$tmp/rout"))" \
  '[[ $rrc -eq 1 ]] && grep -qF "| cuda_bench: every benchmark ran | FAIL |  | BM_RuntimeOverheadPerOp/cuda:1/repeats:3/manual_time: cudaErrorLaunchFailure |" "$fake/report.md" &&
   grep -qF "| cuda | 9.50 (9.00-9.50) |" "$fake/report.md"'

# The report's helpers, hand-worked: which schedules must train alike and whether they did, the
# transport's share of raw NCCL's bandwidth, and what a skipped gtest case said.
python3 - "$root/tools" "$tmp/losses" <<'PY' || fail=1
import json, math, os, sys
sys.path.insert(0, sys.argv[1])
from stagecraft_tools import gpu_report as r
ok = True
def need(got, want, what):
    global ok
    if got != want:
        print(f"FAIL: report helpers: {what}: got {got!r}, want {want!r}"); ok = False
run = lambda **losses: {"schedules": [{"schedule": n, "losses": l} for n, l in losses.items()]}
alike = dict(gpipe=[2.0, 1.5, 1.0], **{"1f1b": [2.0, 1.5, 1.0]}, pipedream=[2.0, 1.7, 1.4], **{"zb-v": [2.0, 1.5, 1.0]})
need(r.flush_loss_mismatch(run(**alike)), (["gpipe", "1f1b", "zb-v"], "1f1b", None), "flush alike, pipedream not judged")
need(r.flush_loss_mismatch(run(**dict(alike, **{"zb-v": [2.0, 1.5, 0.9995]})))[2], None, "5e-4 off: within 1e-3")
need(r.flush_loss_mismatch(run(**dict(alike, **{"zb-v": [2.0, 1.5, 1.002]})))[2], "zb-v step 2: 1.002, 1f1b 1",
     "2e-3 off: the first step that differs")
need(r.flush_loss_mismatch(run(**dict(alike, gpipe=[2.0, math.nan, 1.0])))[2], "gpipe step 1: nan, 1f1b 1.5", "a NaN")
need(r.flush_loss_mismatch(run(**dict(alike, gpipe=[2.0, 1.5])))[2], "gpipe: 2 losses, 1f1b 3", "a run cut short")
need(r.flush_loss_mismatch(run(**{"zb-h1": [1.0], "zb-h2": [1.0]}))[:2], (["zb-h1", "zb-h2"], "zb-h1"), "no 1f1b: the first")
need(r.flush_loss_mismatch(run(pipedream=[1.0])), ([], None, None), "no flush schedule")
delays = lambda d: [{"stage": 0, "weight_delay_forward": d, "weight_delay_backward": d}]
need([r.is_flush({"schedule": "pipedream", "stages": delays(0)}), r.is_flush({"schedule": "1f1b", "stages": delays(1)}),
      r.is_flush({"schedule": "1f1b", "stages": [{"stage": 0}]})], [True, False, True], "weight delays decide where given")
need(r.of_raw_nccl({4096: {0: 10.0, 1: 5.0}, 268435456: {0: 400.0, 1: 380.0, 2: 20.0}, 1 << 30: {0: 410.0}}),
     (268435456, 0.95), "the largest message with both paths")
need(r.of_raw_nccl({4096: {1: 5.0}}), None, "no raw NCCL")
need(r.skip_reason("tests/exec/runtime_mpi.cpp:566\nSkipped\nNCCL needs a GPU per rank: 4 ranks, 2 GPU(s)"),
     "NCCL needs a GPU per rank: 4 ranks, 2 GPU(s)", "a skip's reason")
need(r.skip_reason(""), "skipped", "a skip without one")
out = sys.argv[2]
os.makedirs(os.path.join(out, "gpt-gpu-4x2"))
json.dump(run(**alike), open(os.path.join(out, "gpt-gpu-4x2", "measured.json"), "w"))
checks = []
r.losses_check(out, "gpt-gpu-4x2", checks)
need(checks, [("gpt-gpu-4x2: the flush schedules' losses alike", "pass", "3 schedules, 3 steps, within 0.001 of 1f1b's")],
     "the report's row")
sys.exit(0 if ok else 1)
PY

# Where no GPU is usable, the real thing: one line, devices' reason and exit code, in a minute.
if [[ $rc -ne 0 ]]; then
  start=$SECONDS
  timeout 60 "$gc" --no-build --build-dir "$build" --out "$tmp/gc" >"$tmp/gcout" 2>&1; grc=$?
  check "gpu-check without a usable GPU: exit $grc is devices' $rc" '[[ $grc -eq $rc ]]'
  check "gpu-check without a usable GPU: within a minute ($((SECONDS - start)) s)" '[[ $((SECONDS - start)) -lt 60 ]]'
  check "gpu-check without a usable GPU: one line" '[[ $(wc -l <"$tmp/gcout") -eq 1 ]]'
  check "gpu-check without a usable GPU: it says why" 'grep -qF -- "$reason" "$tmp/gcout"'
  check "gpu-check without a usable GPU: a report of it" '[[ "$(tail -n1 "$tmp/gc/report.md")" == "0 passed, 1 failed" ]]'
  cat "$tmp/gcout"
fi
exit $fail
