#!/usr/bin/env bash
# `stagecraft execute` under mpirun as a user runs it: every schedule of a small scenario on 4
# ranks (oversubscribed on small machines), the JSON and the measured traces lining up op for op
# with the predicted ones, a scenario name that needs escaping; and failures: a rank that throws
# mid-step, a diverged loss, a world size that does not match the scenario, a scenario that
# cannot be executed. Each failure: one cause printed once, every rank gone with a non-zero exit
# well within the timeout, no output.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mpi="$root/scripts/mpirun.sh"
scenario="$root/scenarios/mlp-cpu.yaml"
small=(--set model.mlp.hidden=32 --set pipeline.microbatch_size=8 --set pipeline.steps=3
       --set pipeline.microbatches=8 --set pipeline.ranks=4 --set topology.devices_per_node=4)

# ---- every schedule runs, and its outputs line up with the simulator's ----------------------
timeout 300 "$mpi" 4 "$sc" execute "$scenario" "${small[@]}" --json "$tmp/m.json" --trace "$tmp/m.trace.json" \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
check "execute all: exit 0" '[[ $rc -eq 0 ]]'
[[ $rc -eq 0 ]] || cat "$tmp/err"
check "execute all: a step line per schedule and step" '[[ $(grep -c " step [0-9]/3 " "$tmp/out") -eq 30 ]]'
"$sc" simulate "$scenario" "${small[@]}" --trace "$tmp/p.trace.json" >/dev/null 2>&1
check "simulate same scenario" '[[ $? -eq 0 ]]'
python3 - "$tmp" <<'PY' || fail=1
import json, sys, glob, os, math
tmp = sys.argv[1]
m = json.load(open(f"{tmp}/m.json"))
names = [s["schedule"] for s in m["schedules"]]
ok = True
def need(cond, what):
    global ok
    if not cond:
        print("FAIL:", what); ok = False
need(m["source"] == "measured", "source is measured")
need(sorted(names) == sorted(["gpipe", "1f1b", "pipedream", "2bw", "pipemare", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"]), f"all schedules ran: {names}")
for s in m["schedules"]:
    n = s["schedule"]
    need(len(s["losses"]) == 3 and all(math.isfinite(x) for x in s["losses"]), f"{n}: 3 finite losses")
    need(len(s["per_rank"]) == 4 and all(r["busy_ms"] > 0 for r in s["per_rank"]), f"{n}: 4 busy ranks")
    need(0 <= s["bubble_fraction"] < 1 and s["step_time_ms"] > 0, f"{n}: bubble and step time in range")
    need(s["overhead_ns_per_op"] >= 0, f"{n}: overhead reported")
    parts = ("compute_ms", "wait_ms", "transfer_ms", "overhead_ms", "idle_ms")
    for r in s["per_rank"]:
        need(all(r[k] >= 0 for k in parts) and abs(r["compute_ms"] - r["busy_ms"]) < 1e-5,
             f"{n}: rank {r['rank']} split parts non-negative, compute = busy")
        total = sum(r[k] for k in parts)
        need(abs(total - s["makespan_ms"]) <= 0.01 * s["makespan_ms"],
             f"{n}: rank {r['rank']} split sums to the makespan ({total} vs {s['makespan_ms']})")
    meas = json.load(open(f"{tmp}/m.trace.{n}.json"))
    pred = json.load(open(f"{tmp}/p.trace.{n}.json"))
    need(meas["stagecraft"]["source"] == "measured" and pred["stagecraft"]["source"] == "predicted", f"{n}: sources")
    key = lambda e: (e["pid"], e["args"]["op_index"], e["name"], e["tid"])
    mk = sorted(key(e) for e in meas["traceEvents"] if e.get("ph") == "X")
    pk = sorted(key(e) for e in pred["traceEvents"] if e.get("ph") == "X")
    need(mk == pk and len(mk) > 0, f"{n}: measured ops match predicted ops one to one ({len(mk)} vs {len(pk)})")
    need(any(e.get("ph") == "C" for e in meas["traceEvents"]), f"{n}: memory counters")
    xs = [e for e in meas["traceEvents"] if e.get("ph") == "X"]
    need(min(e["ts"] for e in xs) >= 0 and all(e["dur"] >= 0 for e in xs), f"{n}: times aligned at 0, durations >= 0")
    # One clock for the 4 processes (oversubscribed: some leave the set-up late): no op starts
    # before the op on another rank whose output it needs has ended (F after the previous
    # stage's F, B or I after the next stage's B or I).
    run = {(e["args"]["kind"], e["args"]["stage"], e["args"]["microbatch"], e["args"]["step"]): e
           for e in xs if e["tid"] == 0}
    early = 0.0
    for (kind, stage, mb, step), e in run.items():
        producers = [("F", stage - 1)] if kind == "F" else [(k, stage + 1) for k in ("B", "I")] if kind in ("B", "I") else []
        for pk, ps in producers:
            p = run.get((pk, ps, mb, step))
            if p is not None and p["pid"] != e["pid"]:
                early = max(early, p["ts"] + p["dur"] - e["ts"])
    need(early <= 0.001, f"{n}: an op started {early:.3f} us before its input's producer on another rank ended")
# Flush schedules train the same model on the same batches: the same losses (to fp32 noise).
flush = [s["losses"] for s in m["schedules"] if s["schedule"] in ("gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2")]
need(all(abs(a - b) <= 1e-5 * abs(b) for l in flush for a, b in zip(l, flush[0])), "flush schedules agree on losses")
sys.exit(0 if ok else 1)
PY

# ---- pipeline.schedule: auto: every rank searches alike and the order trains as the start does --
timeout 300 "$mpi" 4 "$sc" execute "$scenario" "${small[@]}" --set pipeline.schedule=[zb-v,auto] \
  --set pipeline.search_evaluations=500 --json "$tmp/auto.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
checkf "execute auto: exit 0" '[[ $rc -eq 0 ]]' "$tmp/err"
python3 - "$tmp/auto.json" <<'PY' || fail=1
import json, sys
runs = {s["schedule"]: s for s in json.load(open(sys.argv[1]))["schedules"]}
ok = sorted(runs) == ["auto", "zb-v"]
# A flush-policy order trains the same model: the losses agree to float summation order.
ok = ok and all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(runs["auto"]["losses"], runs["zb-v"]["losses"]))
print("" if ok else f"FAIL: auto ran and trained as zb-v: {[(k, v['losses']) for k, v in runs.items()]}")
sys.exit(0 if ok else 1)
PY

# ---- data-parallel replicas: P x D processes train as one pipeline of microbatch size D·b ----
# P = 2 x D = 2 (4 processes) and P = 1 x D = 2 (2), each against one pipeline of P ranks at
# twice the microbatch size (the same samples per microbatch): the same losses within 1e-5.
dp=(--set model.mlp.hidden=32 --set pipeline.steps=3 --set pipeline.microbatches=4 --set pipeline.schedule=1f1b
    --set topology.devices_per_node=4)
for ranks in 2 1; do
  timeout 300 "$mpi" $((ranks * 2)) "$sc" execute "$scenario" "${dp[@]}" --set pipeline.ranks=$ranks \
    --set pipeline.data_parallel=2 --set pipeline.microbatch_size=4 --json "$tmp/dp$ranks.json" \
    >"$tmp/dpout" 2>"$tmp/dperr"
  rc=$?
  check "data parallel P=$ranks x D=2: exit 0" '[[ $rc -eq 0 ]]'
  [[ $rc -eq 0 ]] || cat "$tmp/dperr"
  check "data parallel P=$ranks x D=2: one set of step lines" '[[ $(grep -c " step [0-9]/3 " "$tmp/dpout") -eq 3 ]]'
  check "data parallel P=$ranks x D=2: the header names the replicas" 'grep -q "x 2 replicas (mpi)" "$tmp/dpout"'
  timeout 300 "$mpi" "$ranks" "$sc" execute "$scenario" "${dp[@]}" --set pipeline.ranks=$ranks \
    --set pipeline.microbatch_size=8 --json "$tmp/one$ranks.json" >/dev/null 2>"$tmp/dperr"
  check "one pipeline of P=$ranks at microbatch size 8: exit 0" '[[ $? -eq 0 ]]'
  python3 - "$tmp/dp$ranks.json" "$tmp/one$ranks.json" "$ranks" <<'PY' || fail=1
import json, math, sys
dp, one, ranks = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
s, o = dp["schedules"][0], one["schedules"][0]
ok = len(s["losses"]) == 3 and all(math.isfinite(x) for x in s["losses"])
ok = ok and len(s["per_rank"]) == ranks and all(r["busy_ms"] > 0 for r in s["per_rank"])
ok = ok and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(s["losses"], o["losses"]))
if not ok:
    print(f"FAIL: data parallel P={ranks} x D=2 against one pipeline: {s['losses']} vs {o['losses']}, "
          f"{len(s['per_rank'])} ranks")
sys.exit(0 if ok else 1)
PY
done

# ---- a scenario name that needs escaping comes back exactly (tests/cli/names_cli.sh for simulate)
odd=$'odd "quoted" back\\slash \xc3\xbc \xe2\x86\x92 tab\there \x01 end'
timeout 120 "$mpi" 2 "$sc" execute "$scenario" --set model.mlp.hidden=16 --set pipeline.schedule=1f1b \
  --set pipeline.steps=1 --set pipeline.microbatches=2 --json "$tmp/n.json" --trace "$tmp/n.trace.json" \
  --set 'name="odd \"quoted\" back\\slash \u00fc \u2192 tab\there \x01 end"' >/dev/null 2>"$tmp/nerr"
rc=$?
check "odd name: execute runs" '[[ $rc -eq 0 ]]'
[[ $rc -eq 0 ]] || cat "$tmp/nerr"
check "odd name: JSON and trace are valid and give it back" "python3 - \"\$tmp\" \"\$odd\" <<'PY'
import json, sys
tmp, want = sys.argv[1], sys.argv[2]
assert json.load(open(f'{tmp}/n.json', encoding='utf-8'))['scenario'] == want
assert json.load(open(f'{tmp}/n.trace.json', encoding='utf-8'))['stagecraft']['scenario'] == want
PY"

# ---- a run killed midway leaves OUT.partial (never OUT), marked partial, that compare reads ----
# with a warning: the schedule that finished compared as usual, the running one's finished steps.
# Each step does enough work (about 1 ms here) that gpipe's 3000 steps outlast the polling below
# by seconds on any machine: with tiny steps a fast machine finished the whole run between two
# polls, and no partial file was left to read.
kill_set=(--set model.mlp.hidden=128 --set pipeline.microbatch_size=16 --set pipeline.ranks=2
          --set topology.devices_per_node=2 --set 'pipeline.schedule=[1f1b,gpipe]' --set pipeline.steps=3000)
setsid "$mpi" 2 "$sc" execute "$scenario" "${kill_set[@]}" --json "$tmp/k.json" >/dev/null 2>&1 &
kill_pid=$!
for _ in $(seq 1200); do  # until gpipe, the second schedule, has finished a step (at most 120 s)
  [[ -e "$tmp/k.json" ]] && break  # the run ended before it could be killed: the checks below fail
  python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["partial"]; sys.exit(p["schedules_done"] < 1 or not p["step_ms"])' \
    "$tmp/k.json.partial" 2>/dev/null && break
  sleep 0.1
done
# Every process of the run's session: mpirun puts each rank in a process group of its own, and a
# rank that outlives mpirun would finish the run (and remove OUT.partial) before compare reads it.
for proc in /proc/[0-9]*; do
  stat=$(<"$proc/stat") 2>/dev/null || continue
  read -r _ _ _ session _ <<<"${stat##*) }"
  [[ $session == "$kill_pid" ]] && kill -9 "${proc#/proc/}" 2>/dev/null
done
wait "$kill_pid" 2>/dev/null
check "killed run: no complete JSON" '[[ ! -e "$tmp/k.json" ]]'
check "killed run: a partial file, marked partial, with 1f1b complete" "python3 - \"\$tmp/k.json.partial\" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d['partial']
assert p['schedules_done'] == 1 and p['schedules_total'] == 2, p
assert [s['schedule'] for s in d['schedules']] == ['1f1b'] and len(d['schedules'][0]['losses']) == 3000
assert p['schedule'] == 'gpipe' and 1 <= len(p['step_ms']) == len(p['losses']) < 3000, p
PY"
"$sc" simulate "$scenario" "${kill_set[@]}" --json "$tmp/kp.json" >/dev/null 2>&1
"$sc" compare "$tmp/kp.json" "$tmp/k.json.partial" >"$tmp/kc.out" 2>"$tmp/kc.err"
check "killed run: compare reads it" '[[ $? -eq 0 ]]'
check "killed run: compare warns that it is partial" 'grep -q "warning: .*k.json.partial is a partial run, not a complete one: 1 of 2 schedule(s) finished, then gpipe stopped after" "$tmp/kc.err"'
check "killed run: compare shows 1f1b and gpipe's finished steps" 'grep -q "^1f1b: 2 ranks" "$tmp/kc.out" && grep -q "^gpipe (partial run: [0-9]* of 3000 steps finished)" "$tmp/kc.out"'
expect_error "partial file as the prediction" "is a partial measured run, not a prediction" compare "$tmp/k.json.partial" \
  "$tmp/kp.json"

# ---- set-up is outside every deadline ---------------------------------------------------------
# A long run's memory and set-up do not grow with its steps: 10,000 steps under a 10 s timeout.
timeout 300 "$mpi" 2 "$sc" execute "$scenario" --set model.mlp.hidden=16 --set pipeline.microbatch_size=4 \
  --set pipeline.microbatches=4 --set pipeline.steps=10000 --set pipeline.schedule=1f1b --timeout 10s \
  --json "$tmp/long.json" >/dev/null 2>"$tmp/long.err"
rc=$?
check "10,000 steps under --timeout 10s: exit 0 ($rc)" '[[ $rc -eq 0 ]]'
[[ $rc -eq 0 ]] || cat "$tmp/long.err"
check "10,000 steps: every step's loss" \
  'python3 -c "import json, sys; sys.exit(len(json.load(open(sys.argv[1]))[\"schedules\"][0][\"losses\"]) != 10000)" "$tmp/long.json"'
# The last stage's rank builds 64 microbatches of data, each piece of its set-up made 40 ms
# slower (exec/setup_rounds.h's test hook): 2.6 s in all, while its peer, done at once, waits
# under a 1 s timeout. The wait counts only the time since the builder's last piece of work,
# and the run completes; the wall time shows the set-up did outlast the timeout.
start_ns=$(date +%s%N)
STAGECRAFT_TEST_SLOW_SETUP=1:40 timeout 300 "$mpi" 2 "$sc" execute "$scenario" --set model.mlp.hidden=32 \
  --set pipeline.microbatch_size=8 --set pipeline.microbatches=8 --set pipeline.steps=8 \
  --set pipeline.schedule=1f1b --timeout 1s --json "$tmp/setup.json" >/dev/null 2>"$tmp/setup.err"
rc=$?
wall_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
check "a set-up longer than --timeout: exit 0 ($rc)" '[[ $rc -eq 0 ]]'
[[ $rc -eq 0 ]] || cat "$tmp/setup.err"
run_ms=$(python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["schedules"][0]["makespan_ms"]))' \
  "$tmp/setup.json" 2>/dev/null || echo 0)
echo "set-up case: $wall_ms ms in all, $run_ms ms of it the run"
check "a set-up longer than --timeout: it really took more than 2 s beside the run" '[[ $((wall_ms - run_ms)) -gt 2000 ]]'

# ---- failures ---------------------------------------------------------------------------------
# run_fail NAME EXPECTED NP ARGS...: non-zero exit (not the timeout's 124), the cause once on
# stderr, no JSON left behind.
run_fail() {
  local name="$1" expect="$2" np="$3"; shift 3
  rm -f "$tmp/f.json"
  local start=$SECONDS
  timeout 60 "$mpi" "$np" "$sc" execute "$scenario" "${small[@]}" --set pipeline.schedule=1f1b "$@" \
    --json "$tmp/f.json" >"$tmp/fout" 2>"$tmp/ferr"
  local rc=$?
  check "$name: non-zero exit" '[[ $rc -ne 0 ]]'
  check "$name: no hang (exit $rc, $((SECONDS - start)) s)" '[[ $rc -ne 124 && $rc -ne 137 ]]'
  check "$name: cause printed once" '[[ $(grep -c "stagecraft: error: .*$expect" "$tmp/ferr") -eq 1 ]]'
  check "$name: no JSON written" '[[ ! -e "$tmp/f.json" ]]'
  [[ $fail -eq 0 ]] || { echo "--- stderr of $name:"; cat "$tmp/ferr"; }
}
run_fail "rank throws mid-step" "rank 2 .*injected fault at step 1" 4 --inject-fault 2:1
run_fail "last rank throws" "rank 3 .*injected fault at step 0" 4 --inject-fault 3:0
run_fail "loss diverges" "loss is \(nan\|inf\|-nan\)" 4 --set training.optimizer=sgd --set training.lr=1e12
run_fail "an allocation fails" "rank 2 .*out of memory at 2F[0-9]* (step 1): device memory limit of" 4 --inject-fault 2:1:oom
run_fail "a NaN weight" "rank 3 .*step 1 microbatch 0: loss is nan" 4 --inject-fault 1:1:nan
# A rank that hangs: its peer's wait runs into --timeout, and every rank is gone within the
# deadline + 10 s (issue 15's bound), the waiting rank naming the op, its step, the peer and the
# timeout. Two ranks, so exactly one rank waits on the hung one.
start_ns=$(date +%s%N)
run_fail "a hung rank" "rank 0 .*0RECV_B[0-9]* (step 1) from rank 1 timed out: .*did not complete within 3 s" 2 \
  --set pipeline.ranks=2 --set topology.devices_per_node=2 --inject-fault 1:1:hang --timeout 3s
hang_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
echo "hung rank: the run ended after $hang_ms ms (deadline 3 s)"
check "a hung rank: over within the deadline + 10 s ($hang_ms ms)" '[[ $hang_ms -lt 13000 ]]'
check "a hung rank: it said where it hung" 'grep -q "rank 1 hangs at step 1" "$tmp/ferr"'
expect_error "bad timeout" "--timeout 0s: must be at least 1us" execute "$scenario" --set pipeline.ranks=1 --timeout 0s
expect_error "a timeout below a microsecond" "--timeout 999ns: must be at least 1us" execute "$scenario" \
  --set pipeline.ranks=1 --timeout 999ns
expect_error "timeout without a unit" "--timeout: expected a duration" execute "$scenario" --set pipeline.ranks=1 \
  --timeout 5
expect_error "unknown fault" "--inject-fault '1:2:melt': expected RANK:STEP[:throw|hang|nan|oom]" execute "$scenario" \
  --set pipeline.ranks=1 --inject-fault 1:2:melt
# A fault that names no rank of the job or no step of the run would inject nothing.
expect_error "a fault on a rank outside the job" "--inject-fault 5:1: rank 5 is not in the job (ranks 0..1)" \
  execute "$scenario" --set pipeline.ranks=2 --inject-fault 5:1
expect_error "a fault past the last step" "--inject-fault 0:99: step 99 is past the run (steps 0..19, pipeline.steps 20)" \
  execute "$scenario" --set pipeline.ranks=2 --inject-fault 0:99
expect_error "an empty fault" "--inject-fault '': expected RANK:STEP" execute "$scenario" --set pipeline.ranks=2 \
  --inject-fault ''
expect_error "a fault flag without its value" "--inject-fault: 1 required TEXT missing" execute "$scenario" \
  --set pipeline.ranks=2 --inject-fault=
# The simulator predicts the run will not fit the scenario's device memory: refused before it
# starts, naming each rank's predicted peak.
run_fail "predicted out of memory" "predicted to exceed the device memory of 16.00 KiB (topology.device.memory): 1f1b (rank 0 [0-9.]* KiB, rank 1" 4 \
  --set topology.device.memory=16KiB
run_fail "world larger than ranks" "pipeline.ranks is 4 but the MPI job has 5" 5
run_fail "world smaller than ranks" "pipeline.ranks is 4 but the MPI job has 2" 2
# A replica's rank that throws (world rank 3: replica 1's rank 1) ends the job, named once; one
# that hangs (world rank 1 of P = 1 x D = 2) holds its peer's all-reduce, whose wait names the
# REDUCE_GRAD op, the replicas and the deadline.
run_fail "a replica's rank throws" "rank 3 .*injected fault at step 1" 4 --set pipeline.ranks=2 \
  --set pipeline.data_parallel=2 --inject-fault 3:1
run_fail "a replica hangs" "rank 0 .*0REDUCE_GRAD2 (step 1) timed out: the MPI all-reduce of [0-9]* floats over 2 replicas did not complete within 3 s" 2 \
  --set pipeline.ranks=1 --set pipeline.data_parallel=2 --inject-fault 1:1:hang --timeout 3s
run_fail "data parallel, world too small" "pipeline.ranks 2 x pipeline.data_parallel 2 = 4 but the MPI job has 2 process(es); run it as \`mpirun -np 4" 2 \
  --set pipeline.ranks=2 --set pipeline.data_parallel=2

# Without mpirun (a singleton MPI process) and bad input: the one-line contract.
expect_error "no mpirun" "run it as \`mpirun -np 2" execute "$scenario"
expect_error "costs-only scenario" "it can be simulated only" execute "$root/scenarios/uniform-costs.yaml"
expect_error "tensor-parallel scenario" "pipeline.tensor_parallel: the executor runs data-parallel replicas of a pipeline, one device per process (tensor 2 is simulated only)" \
  execute "$root/scenarios/gpt-tiny-cpu.yaml" --set pipeline.tensor_parallel=2 --set topology.devices_per_node=8
expect_error "fp8" "training.fp8: the executor runs its GEMMs at training.dtype (FP8 is simulated only)" \
  execute "$root/scenarios/gpt-gpu.yaml" --set topology.device=H100-SXM --set training.dtype=bf16 \
  --set model.transformer.dtype=bf16 --set training.fp8=true
expect_error "selective recompute" "pipeline.recompute: selective is modelled by the simulator only" \
  execute "$root/scenarios/gpt-tiny-cpu.yaml" --set pipeline.recompute=selective
expect_error "bad fault flag" "--inject-fault 'x': expected RANK:STEP" execute "$scenario" --set pipeline.ranks=1 \
  --inject-fault x
expect_error "unknown key" "microbatchs" execute "$scenario" --set pipeline.microbatchs=3
expect_error "bf16 on the cpu" "the cpu executor trains in fp32, got bf16" execute "$scenario" \
  --set pipeline.ranks=1 --set training.dtype=bf16
# The cuda backend asked for where there is no GPU (or, in a build without CUDA such as the
# sanitizer build, no cuda backend): one line, nothing written.
"$sc" devices --quiet; devices_rc=$?; if [[ $devices_rc -eq 3 || $devices_rc -eq 4 ]]; then  # no cuda backend, no GPU
  no_cuda="no CUDA device was found"
  probe="$("$sc" execute "$scenario" --set pipeline.ranks=1 --backend cuda 2>&1)"
  if [[ "$probe" == *"this build has no cuda backend"* ]]; then no_cuda="this build has no cuda backend"; fi
  expect_error "cuda without a GPU" "--backend cuda: $no_cuda" execute "$scenario" \
    --set pipeline.ranks=1 --backend cuda --json "$tmp/cuda.json"
  check "cuda without a GPU: no JSON written" '[[ ! -e "$tmp/cuda.json" ]]'
  expect_error "profile on cuda without a GPU" "$no_cuda" profile "$scenario" --backend cuda \
    --out "$tmp/cuda-profile.yaml"
  check "profile on cuda without a GPU: no profile written" '[[ ! -e "$tmp/cuda-profile.yaml" ]]'
fi
# --graphs on where the device runs each call as it is made (the cpu): the run is the same and
# rank 0 says once per schedule why nothing is captured.
timeout 120 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --set pipeline.ranks=2 --set topology.devices_per_node=2 \
  --set 'pipeline.schedule=[1f1b,zb-h1]' --backend cpu --graphs on >"$tmp/gout" 2>"$tmp/gerr"
checkf "graphs on the cpu: exit 0" '[[ $? -eq 0 ]]' "$tmp/gerr"
check "graphs on the cpu: one line per schedule says why not" \
  '[[ $(grep -c "^execute: \(1f1b\|zb-h1\): step graphs off: the device runs each call as it is made (no graphs)$" \
       "$tmp/gerr") -eq 2 ]]'
check "graphs on the cpu: every step ran" '[[ $(grep -c " step [0-9]/3 " "$tmp/gout") -eq 6 ]]'
exit $fail
