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
"$gc" --dry-run --no-build --build-dir "$build" --out "$tmp/plan" >"$tmp/plan.txt" 2>&1; prc=$?
check "gpu-check --dry-run: exit 0" '[[ $prc -eq 0 ]]'
check "gpu-check --dry-run: runs nothing" '[[ ! -e "$tmp/plan" ]]'
for want in "devices: .*/cli/stagecraft devices --json" "ctest -L gpu: ctest --test-dir .* -L gpu" \
            "mlp-gpu: profile: .*mpirun.sh 2 .* profile .*mlp-gpu.yaml --backend cuda" "mlp-gpu: simulate: " \
            "mlp-gpu: execute: .*mpirun.sh 2 .* execute .*mlp-gpu.yaml --backend cuda" "mlp-gpu: compare: " \
            "gpt-gpu: profile: " "gpt-gpu: simulate: " "gpt-gpu: execute: .*gpt-gpu.yaml --backend cuda" \
            "gpt-gpu: compare: .* compare .*predicted.json .*measured.json --trace .*measured.trace.json" \
            "mlp-gpu: what-if: .* replay .*measured.json --trace .*measured.trace.1f1b.json --set pipeline.schedule=all" \
            "mlp-gpu: what-if compare: .* compare .*whatif.json .*measured.json" "gpt-gpu: what-if: " \
            "mlp-gpu-1rank: profile: .*mpirun.sh 1 .* profile .*mlp-gpu.yaml --set pipeline.ranks=1 .*--backend cuda" \
            "gpt-gpu-1rank: execute: .*mpirun.sh 1 .* execute .*gpt-gpu.yaml --set pipeline.ranks=1 " \
            "cuda_bench: .*cuda_bench --benchmark_out=" "nccl_p2p_bench: .*mpirun.sh 2 " \
            "layer probe: .*scripts/layer-probe.sh --out " \
            "layer probe, fused: .*scripts/layer-probe.sh --out .*layer-probe-fused --fused" \
            "zero bubble release's stage: .*scripts/zb-fork-layer.sh --out .*zb-fork-layer.json"; do
  check "gpu-check --dry-run: a step '$want'" 'grep -q "^$want" "$tmp/plan.txt"'
done
# Each scenario twice (its ranks, and one rank for a GPU its ranks would share): 6 steps each.
check "gpu-check --dry-run: 31 steps without the build" '[[ $(wc -l <"$tmp/plan.txt") -eq 31 ]]'
"$gc" --dry-run --out "$tmp/plan" | head -n1 >"$tmp/first"
check "gpu-check --dry-run: builds first" 'grep -q "^build: .*scripts/build.sh" "$tmp/first"'
"$gc" --bogus >/dev/null 2>&1
check "gpu-check: a bad flag exits 2" '[[ $? -eq 2 ]]'
# A machine without the NVIDIA driver is told so before any build (the build takes 10+ minutes on
# two cores): exit 4, one line, and the build folder untouched.
mkdir -p "$tmp/nobuild"
GPU_CHECK_DRIVER_PATHS="$tmp/no-such-device" timeout 120 "$gc" --build-dir "$tmp/nobuild" --out "$tmp/gc-nodriver" \
  >"$tmp/nodriver.txt" 2>&1
check "gpu-check without a driver: exit 4 (got $?)" '[[ $? -eq 4 ]]'
check "gpu-check without a driver: one line saying so" \
  '[[ $(wc -l <"$tmp/nodriver.txt") -eq 1 ]] && grep -q "^gpu-check: no GPU: no NVIDIA driver .*nothing was built" "$tmp/nodriver.txt"'
check "gpu-check without a driver: nothing built" '[[ -z "$(ls -A "$tmp/nobuild")" ]]'
check "gpu-check without a driver: the report says why" 'grep -q "no NVIDIA driver" "$tmp/gc-nodriver/steps.tsv"'

# --one-rank on a machine that says it has one GPU: a made-up build whose `stagecraft devices`
# reports one usable GPU and whose every other command fails, and an mpirun that runs its command
# once. The scenarios' 2-rank loops are skipped and named; their one-rank loops run (and fail
# here); without --one-rank both run.
fb="$tmp/fakebuild"; mkdir -p "$fb/cli" "$tmp/fakebin"
cat >"$fb/cli/stagecraft" <<'SH'
#!/usr/bin/env bash
[[ "$1" == devices ]] || exit 1
echo "GPU 0: Made Up, 80.00 GiB, compute capability 9.0: usable"
echo "verdict: the cuda backend is usable here (1 GPU(s))"
[[ "${2:-}" == --json ]] && echo '{}' >"$3"
exit 0
SH
printf '#!/usr/bin/env bash\nshift 3\nexec "$@"\n' >"$tmp/fakebin/mpirun"
chmod +x "$fb/cli/stagecraft" "$tmp/fakebin/mpirun"
for mode in one-rank both; do
  flags=(--no-build --build-dir "$fb" --out "$tmp/gc-$mode")
  [[ $mode == one-rank ]] && flags+=(--one-rank)
  PATH="$tmp/fakebin:$PATH" PYTHON=/nonexistent "$gc" "${flags[@]}" >"$tmp/gc-$mode.txt" 2>&1
done
check "gpu-check --one-rank: the 2-rank loops skipped, named" \
  '[[ $(grep -cP "^(mlp|gpt)-gpu\tskip\t0\t--one-rank: 2 ranks, 1 GPU\(s\); only the one-rank loop" "$tmp/gc-one-rank/steps.tsv") -eq 2 ]]'
check "gpu-check --one-rank: no 2-rank step, every one-rank step" \
  '! grep -qP "^(mlp|gpt)-gpu: " "$tmp/gc-one-rank/steps.tsv" && [[ $(grep -cP "^(mlp|gpt)-gpu-1rank: " "$tmp/gc-one-rank/steps.tsv") -eq 10 ]]'
check "gpu-check without it: both loops" \
  '[[ $(grep -cP "^(mlp|gpt)-gpu: " "$tmp/gc-both/steps.tsv") -eq 10 && $(grep -cP "^(mlp|gpt)-gpu-1rank: " "$tmp/gc-both/steps.tsv") -eq 10 ]]'

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
python3 "$root/scripts/gpu_check_report.py" "$fake" >"$tmp/rout" 2>&1; rrc=$?
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
sed -i 's/"of_cublas": 0.55/"of_cublas": 0.65/; s/"us_per_op": 31.3, "math_us_per_op": 27.05,/"us_per_op": 8.5, "math_us_per_op": 4.25,/' \
  "$fake/cuda_bench.json"
python3 "$root/scripts/gpu_check_report.py" "$fake" >"$tmp/rout" 2>&1; rrc=$?
check "report: all passed, exit 0 ($(cat "$tmp/rout"))" '[[ $rrc -eq 0 && "$(cat "$tmp/rout")" == "5 passed, 0 failed" ]]'
# A cuda_bench without the math's baseline (an older build's): the whole run's check alone.
sed -i 's/"us_per_op": 8.5, "math_us_per_op": 4.25, "runtime_us_per_op": 4.25,/"us_per_op": 8.5,/' "$fake/cuda_bench.json"
python3 "$root/scripts/gpu_check_report.py" "$fake" >"$tmp/rout" 2>&1; rrc=$?
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
python3 "$root/scripts/gpu_check_report.py" "$fake" >"$tmp/rout" 2>&1; rrc=$?
check "report: repetitions, the median judged ($(cat "$tmp/rout"))" \
  '[[ $rrc -eq 0 && "$(cat "$tmp/rout")" == "4 passed, 0 failed" ]]'
for want in "| cuda | 9.50 (9.00-12.00) | 3.50 (3.00-4.00) | 6.00 (6.00-8.00) | - |" "| cpu | 0.70 | - | - | - |" \
            "Each the median of 3 repetitions (their range in brackets)." \
            "| runtime overhead at most 10 us per op on the GPU | PASS |  | 9.50 us |"; do
  check "report: repetitions, has '$want'" 'grep -qF -- "$want" "$fake/report.md"'
done
check "report: repetitions, one row each" '[[ $(grep -c "^| cuda |" "$fake/report.md") -eq 1 && $(grep -c "^| cpu |" "$fake/report.md") -eq 1 ]]'
mv "$fake/cuda_bench.json.failed" "$fake/cuda_bench.json"
python3 "$root/scripts/gpu_check_report.py" "$fake" >"$tmp/rout" 2>&1; rrc=$?
check "report: a failed repetition fails the report ($(cat "$tmp/rout"))" \
  '[[ $rrc -eq 1 ]] && grep -qF "| cuda_bench: every benchmark ran | FAIL |  | BM_RuntimeOverheadPerOp/cuda:1/repeats:3/manual_time: cudaErrorLaunchFailure |" "$fake/report.md" &&
   grep -qF "| cuda | 9.50 (9.00-9.50) |" "$fake/report.md"'

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
