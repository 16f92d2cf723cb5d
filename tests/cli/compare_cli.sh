#!/usr/bin/env bash
# `stagecraft compare` as a user runs it: hand-computed errors from tests/data/compare, the
# --max-error exit code (a partial run's error included), the --json output (checked before any
# input is read), a file compared with itself, and bad input.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
data="$root/tests/data/compare"
pred="$data/predicted.json"; meas="$data/measured.json"

# 1f1b: step 110 vs 100 ms, throughput 288 vs 320, bubble 0.25 vs 0.20, busy 80/80 and 90/75;
# gpipe: step 95 vs 100 ms (exactly -5%), bubble equal; zb-h1 only predicted, interleaved only measured.
out="$("$sc" compare "$pred" "$meas")"; rc=$?
check "compare runs" '[[ $rc -eq 0 ]]'
block() { awk -v s="$1:" '$1 == s {on=1; next} /^$/ {on=0} on' <<<"$out"; }
b1="$(block 1f1b)"; b2="$(block gpipe)"
check "1f1b header" 'grep -qx "1f1b: 2 ranks, 4 microbatches x 8 samples, 2 step(s)" <<<"$out"'
check "1f1b step time +10.0%" 'grep -qE "^  step time \(ms\) +110\.000 +100\.000 +\+10\.0%$" <<<"$b1"'
check "1f1b throughput -10.0%" 'grep -qE "^  throughput \(samples/s\) +288\.0 +320\.0 +-10\.0%$" <<<"$b1"'
check "1f1b bubble +5.0 pp" 'grep -qE "^  bubble \(%\) +25\.00 +20\.00 +\+5\.0 pp$" <<<"$b1"'
check "1f1b rank 0 busy 0.0%" 'grep -qE "^  rank 0 busy \(ms\) +80\.000 +80\.000 +0\.0%$" <<<"$b1"'
check "1f1b rank 1 busy +20.0%" 'grep -qE "^  rank 1 busy \(ms\) +90\.000 +75\.000 +\+20\.0%$" <<<"$b1"'
check "1f1b losses" 'grep -qx "  loss (measured): first 2.5, last 1.25 over 2 step(s)" <<<"$b1"'
check "gpipe step time -5.0%" 'grep -qE "^  step time \(ms\) +95\.000 +100\.000 +-5\.0%$" <<<"$b2"'
check "gpipe bubble 0.0 pp" 'grep -qE "^  bubble \(%\) +30\.00 +30\.00 +0\.0 pp$" <<<"$b2"'
check "gpipe has no loss line" '! grep -q loss <<<"$b2"'
check "predicted order" '[[ $(grep -nx "1f1b:.*" <<<"$out" | cut -d: -f1) -lt $(grep -n "^gpipe:" <<<"$out" | cut -d: -f1) ]]'
check "only in predicted" 'grep -qx "only in predicted: zb-h1" <<<"$out"'
check "only in measured" 'grep -qx "only in measured: interleaved" <<<"$out"'
check "worst is last line" '[[ "$(tail -n 1 <<<"$out")" == "worst step-time error: +10.0% (1f1b)" ]]'

# The measured step-to-step spread: 1f1b's steps 1..3 take 100, 96, 104 ms (step 0 is left
# out): median 100, 96 to 104, spread (104 - 96) / 100 = 8.0%; gpipe has no step times.
sed 's/"losses"/"step_ms":[120,100,96,104],"losses"/' "$meas" >"$tmp/steps.json"
out="$("$sc" compare "$pred" "$tmp/steps.json")"; rc=$?
check "spread: runs" '[[ $rc -eq 0 ]]'
check "spread: 1f1b line" 'grep -qx "  measured steps 1..3: median 100.000 ms, 96.000 to 104.000 ms (spread 8.0%)" <<<"$out"'
check "spread: summary column" 'grep -qE "^1f1b +110\.000 +100\.000 +\+10\.0% +8\.0% " <<<"$out"'
check "spread: gpipe has none" 'grep -qE "^gpipe +95\.000 +100\.000 +-5\.0% +- " <<<"$out"'

out="$("$sc" compare "$pred" "$meas" --max-error 5)"; rc=$?
check "--max-error 5 exits 3" '[[ $rc -eq 3 ]]'
check "--max-error 5 names 1f1b only (gpipe is exactly 5%)" \
  '[[ "$(tail -n 1 <<<"$out")" == "step-time error above 5.0%: 1f1b (+10.0%)" ]]'
out="$("$sc" compare "$pred" "$meas" --max-error 20)"; rc=$?
check "--max-error 20 exits 0" '[[ $rc -eq 0 ]]'
check "--max-error 20 says within" 'grep -qx "all step-time errors within 20.0%" <<<"$out"'

"$sc" compare "$pred" "$meas" --json "$tmp/c.json" --max-error 5 >/dev/null
check "--json written" '[[ -s "$tmp/c.json" ]]'
check "--json content" "python3 - \"\$tmp/c.json\" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
s = {x['schedule']: x for x in c['schedules']}
assert list(s) == ['1f1b', 'gpipe'], list(s)
one = s['1f1b']
assert abs(one['step_time_ms']['error_pct'] - 10.0) < 1e-9
assert one['step_time_ms']['predicted'] == 110 and one['step_time_ms']['measured'] == 100
assert abs(one['throughput_samples_per_s']['error_pct'] + 10.0) < 1e-9
assert abs(one['bubble_fraction']['error_pp'] - 5.0) < 1e-9
assert [abs(r['busy_ms']['error_pct']) for r in one['per_rank']] == [0.0, 20.0]
assert one['losses'] == {'first': 2.5, 'last': 1.25}
assert abs(s['gpipe']['step_time_ms']['error_pct'] + 5.0) < 1e-9
assert c['only_in_predicted'] == ['zb-h1'] and c['only_in_measured'] == ['interleaved']
assert c['worst_step_time']['schedule'] == '1f1b' and c['exceeded'] == ['1f1b']
PY"

# End to end: a simulated file compared with a copy of itself has no error anywhere.
"$sc" simulate "$root/scenarios/uniform-costs.yaml" --json "$tmp/p.json" >/dev/null
cp "$tmp/p.json" "$tmp/p-copy.json"
out="$("$sc" compare "$tmp/p.json" "$tmp/p-copy.json" --max-error 0)"; rc=$?
check "self compare exits 0" '[[ $rc -eq 0 ]]'
check "self compare: every error 0.0" \
  '! grep -E "^  (step|throughput|bubble|rank)" <<<"$out" | grep -vqE " 0\.0(%| pp| ms)$"'
check "self compare: several schedules" '[[ $(grep -c "^  step time" <<<"$out") -ge 2 ]]'
check "self compare: worst 0.0%" 'grep -qE "^worst step-time error: 0\.0% " <<<"$out"'
check "self compare: one replica has no collective part" '! grep -q collective <<<"$out" && ! grep -q collective "$tmp/p.json"'

# Replicas: a D = 2 prediction (8 devices on one node) against a copy of it in which 1f1b's rank 0
# spent 1.5 ms more blocked on collectives and 1.5 ms more in overhead: rank 0's collective and
# overhead errors are -1.5 ms, every other rank's collective 0.0 ms, and the JSON lists the
# collective part between transfer and overhead.
"$sc" simulate "$root/scenarios/uniform-costs.yaml" --set pipeline.data_parallel=2 --set topology.devices_per_node=8 \
  --set 'pipeline.schedule=[1f1b, gpipe]' --json "$tmp/dp.json" >/dev/null
check "replicas: simulate states D and collective_ms" "python3 - \"\$tmp/dp.json\" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d['schedules']:
    assert s['data_parallel'] == 2, s
    for r in s['per_rank']:
        parts = ('compute_ms', 'wait_ms', 'transfer_ms', 'collective_ms', 'overhead_ms', 'idle_ms')
        assert abs(sum(r[k] for k in parts) - s['makespan_ms']) < 1e-5, r
PY"
python3 - "$tmp/dp.json" "$tmp/dp-measured.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["source"] = "measured"
r0 = next(s for s in d["schedules"] if s["schedule"] == "1f1b")["per_rank"][0]
r0["collective_ms"] += 1.5
r0["overhead_ms"] += 1.5
json.dump(d, open(sys.argv[2], "w"))
PY
out="$("$sc" compare "$tmp/dp.json" "$tmp/dp-measured.json" --json "$tmp/dp-compare.json")"; rc=$?
b1="$(block 1f1b)"
check "replicas: compare runs" '[[ $rc -eq 0 ]]'
check "replicas: header names the replicas" 'grep -qx "1f1b: 4 ranks x 2 replicas, 8 microbatches x 1 samples, 1 step(s)" <<<"$out"'
check "replicas: rank 0 collective -1.5 ms" 'grep -qE "^  rank 0 collective \(ms\) +[0-9.]+ +[0-9.]+ +-1\.5 ms$" <<<"$b1"'
check "replicas: rank 3 collective 0.0 ms" 'grep -qE "^  rank 3 collective \(ms\) +[0-9.]+ +[0-9.]+ +0\.0 ms$" <<<"$b1"'
check "replicas: collective rows on every rank of both schedules" '[[ $(grep -c "^  rank [0-9] collective (ms)" <<<"$out") -eq 8 ]]'
check "replicas: collective between transfer and overhead" \
  '[[ "$(grep -E "^  rank 1 (transfer|collective|overhead)" <<<"$b1" | awk "{print \$3}" | tr "\n" " ")" == "transfer collective overhead " ]]'
check "replicas: --json" "python3 - \"\$tmp/dp-compare.json\" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
s = {x['schedule']: x for x in c['schedules']}
one = s['1f1b']
assert one['data_parallel'] == 2
assert abs(one['per_rank'][0]['collective_ms']['error_ms'] + 1.5) < 1e-6, one['per_rank'][0]
assert abs(one['per_rank'][0]['overhead_ms']['error_ms'] + 1.5) < 1e-6
assert all(r['collective_ms']['error_ms'] == 0 for r in one['per_rank'][1:] + s['gpipe']['per_rank'])
assert list(one['per_rank'][0])[3:] == ['wait_ms', 'transfer_ms', 'collective_ms', 'overhead_ms', 'idle_ms'], list(one['per_rank'][0])
PY"

# bad NAME EXPECTED PREDICTED MEASURED: one clear line, non-zero exit, no --json file left behind.
bad() {
  local name="$1" expect="$2"; shift 2
  rm -f "$tmp/out.json"
  expect_error "$name" "$expect" compare "$@" --json "$tmp/out.json"
  check "$name: no partial output" '[[ ! -e "$tmp/out.json" ]]'
}
m="$(cat "$meas")"
bad "missing file" "$tmp/none.json: cannot read: no such file or directory" "$tmp/none.json" "$meas"
head -c 300 "$meas" >"$tmp/trunc.json"
bad "truncated json" "trunc.json: not valid JSON (byte 301)" "$pred" "$tmp/trunc.json"
printf '%s\n' "${m/\"step_time_ms\":90.0,/}" >"$tmp/nokey.json"
bad "missing key" "nokey.json: schedules[1].step_time_ms: missing (expected a number)" "$pred" "$tmp/nokey.json"
printf '%s\n' "${m/\"step_time_ms\":90.0/\"step_time_ms\":\"90\"}" >"$tmp/type.json"
bad "ill-typed key" "type.json: schedules[1].step_time_ms: expected a number (got string)" "$pred" "$tmp/type.json"
printf '%s\n' "${m/\"step_time_ms\":90.0/\"step_time_ms\":-90.0}" >"$tmp/negative.json"
bad "negative value" "negative.json: schedules[1].step_time_ms: expected a non-negative number (got -90.0)" "$pred" "$tmp/negative.json"
printf '%s\n' "${m/\"busy_ms\":75.0\}/\"busy\":75.0\}}" >"$tmp/rank.json"
bad "missing per-rank key" "rank.json: schedules[1].per_rank[0].busy_ms: missing" "$pred" "$tmp/rank.json"
printf '%s\n' "${m/\"schedule\":\"gpipe\",\"ranks\":2/\"schedule\":\"gpipe\",\"ranks\":1}" >"$tmp/short.json"
bad "per_rank longer than ranks" "short.json: schedules[0].per_rank: expected 1 entries (ranks), got 2" "$pred" "$tmp/short.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); g=d["schedules"][0]; g["ranks"]=3; g["per_rank"].append({"busy_ms":1.0}); json.dump(d,open(sys.argv[2],"w"))' \
  "$meas" "$tmp/ranks.json"
bad "per_rank mismatch between files" "ranks.json: schedule gpipe has 3 ranks in per_rank but 2 in" "$pred" "$tmp/ranks.json"
printf '%s\n' "${m/\"schedule\":\"gpipe\"/\"schedule\":\"1f1b\"}" >"$tmp/dup.json"
bad "duplicate schedule" "dup.json: schedules[2]: schedule '1f1b' appears twice" "$pred" "$tmp/dup.json"
echo '[]' >"$tmp/array.json"
bad "not an object" "array.json: expected an object (got array)" "$pred" "$tmp/array.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["schedules"]=d["schedules"][1:2]; json.dump(d,open(sys.argv[2],"w"))' \
  "$meas" "$tmp/disjoint.json"
bad "no schedule in common" "no schedule in common: $pred has [1f1b, gpipe, zb-h1], $tmp/disjoint.json has [interleaved]" \
  "$pred" "$tmp/disjoint.json"
bad "directory" "$tmp: cannot read: is a directory" "$pred" "$tmp"
expect_error "negative --max-error" "expected a percentage >= 0" compare "$pred" "$meas" --max-error -1

printf '%s\n' "${m/\"bubble_fraction\":0.15/\"bubble_fraction\":1.5}" >"$tmp/bubble.json"
bad "a bubble over 100%" "bubble.json: schedules[1].bubble_fraction: expected a fraction from 0 to 1 (got 1.5)" \
  "$pred" "$tmp/bubble.json"
bad "one file twice" "$pred: given as both the predicted and the measured file" "$pred" "$pred"
bad "one file twice, by two names" "$data/../compare/predicted.json: given as both the predicted and the measured file" \
  "$pred" "$data/../compare/predicted.json"
bad "the files swapped" "$meas: source is 'measured' and $pred's is 'predicted': the files are swapped" "$meas" "$pred"

# --json is checked before the inputs are read: its error comes first, even with a missing input.
expect_error "--json into a missing folder" "--json $tmp/no/c.json: cannot write: folder $tmp/no: no such file or directory" \
  compare "$tmp/none.json" "$meas" --json "$tmp/no/c.json"
expect_error "--json a directory" "--json $tmp: cannot write: is a directory" compare "$tmp/none.json" "$meas" --json "$tmp"
# --json -: the JSON alone on standard output, the table on stderr.
"$sc" compare "$pred" "$meas" --json - >"$tmp/stdout.json" 2>"$tmp/table"; rc=$?
check "--json -: exit 0, JSON on stdout, table on stderr" \
  '[[ $rc -eq 0 ]] && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$tmp/stdout.json" && grep -q "^worst step-time error" "$tmp/table"'

# ---- a partial run (execute's OUT.partial): its error counts against --max-error -------------
# gpipe complete (95 vs 100 ms: -5.0%); 1f1b stopped after 3 of 10 steps of 300, 230, 250 ms:
# the median of the steps after the first is 240 ms, so 110 predicted is (110 - 240) / 240 = -54.2%.
python3 - "$meas" "$tmp/run.json.partial" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["schedules"] = [s for s in d["schedules"] if s["schedule"] == "gpipe"]
d["partial"] = {"schedules_done": 1, "schedules_total": 2, "schedule": "1f1b", "steps": 10,
                "losses": [3.0, 2.0, 1.0], "step_ms": [300.0, 230.0, 250.0]}
json.dump(d, open(sys.argv[2], "w"))
PY
out="$("$sc" compare "$pred" "$tmp/run.json.partial" 2>"$tmp/err")"; rc=$?
check "partial: no limit, exit 0" '[[ $rc -eq 0 ]] && grep -q "is a partial run" "$tmp/err"'
check "partial: its error is the worst" '[[ "$(tail -n 1 <<<"$out")" == "worst step-time error: -54.2% (1f1b (partial))" ]]'
out="$("$sc" compare "$pred" "$tmp/run.json.partial" --max-error 10 --json "$tmp/partial.json" 2>/dev/null)"; rc=$?
check "partial beyond --max-error: exit 3" '[[ $rc -eq 3 ]]'
check "partial beyond --max-error: named" '[[ "$(tail -n 1 <<<"$out")" == "step-time error above 10.0%: 1f1b (partial) (-54.2%)" ]]'
check "partial beyond --max-error: in the JSON" \
  'python3 -c "import json,sys; c=json.load(open(sys.argv[1])); sys.exit(c[\"exceeded\"] != [\"1f1b (partial)\"])" "$tmp/partial.json"'
out="$("$sc" compare "$pred" "$tmp/run.json.partial" --max-error 1 2>/dev/null)"; rc=$?
check "partial and complete beyond --max-error: exit 3, both named" \
  '[[ $rc -eq 3 && "$(tail -n 1 <<<"$out")" == "step-time error above 1.0%: gpipe (-5.0%), 1f1b (partial) (-54.2%)" ]]'
out="$("$sc" compare "$pred" "$tmp/run.json.partial" --max-error 60 2>/dev/null)"; rc=$?
check "partial within --max-error: exit 0" '[[ $rc -eq 0 ]] && grep -qx "all step-time errors within 60.0%" <<<"$out"'
# ---- compare --trace: a trace it cannot use in full is one line; never a silent "no split" -----
# A measured run made from a simulation of uniform-costs (its files marked measured, the scenario
# it ran and its overrides stated, as execute writes them): each schedule's replay is op for op.
"$sc" simulate "$root/scenarios/uniform-costs.yaml" --set 'pipeline.schedule=[1f1b,gpipe]' --json "$tmp/tp.json" \
  --trace "$tmp/sim.json" >/dev/null
python3 - "$tmp" "$root/scenarios/uniform-costs.yaml" <<'PY'
import json, sys
tmp, scenario = sys.argv[1], sys.argv[2]
d = json.load(open(f"{tmp}/tp.json"))
d.update(source="measured", scenario_file=scenario, overrides=["pipeline.schedule=[1f1b,gpipe]"])
json.dump(d, open(f"{tmp}/tm.json", "w"))
for s in ("1f1b", "gpipe"):
    t = open(f"{tmp}/sim.{s}.json").read().replace('"source":"predicted"', '"source":"measured"', 1)
    open(f"{tmp}/mt.{s}.json", "w").write(t)
PY
splits() { grep -c "step-time error .* = cost drift .* + model error " <<<"$1"; }
out="$("$sc" compare "$tmp/tp.json" "$tmp/tm.json" --trace "$tmp/mt.json" 2>&1)"; rc=$?
check "--trace BASE: exit 0, both schedules split" '[[ $rc -eq 0 && $(splits "$out") -eq 2 ]]'
out="$("$sc" compare "$tmp/tp.json" "$tmp/tm.json" --trace "$tmp/mt.gpipe.json" 2>&1)"; rc=$?
check "--trace one schedule's own file: exit 0, gpipe split" \
  '[[ $rc -eq 0 && $(splits "$out") -eq 1 ]] && sed -n "/^gpipe:/,/^\$/p" <<<"$out" | grep -q "cost drift"'
cmp_trace() { expect_error "$1" "$2" compare "$tmp/tp.json" "$tmp/tm.json" --trace "$3"; }
cmp_trace "--trace missing" "$tmp/nope.json: no such file, nor 1f1b's trace beside it ($tmp/nope.1f1b.json)" "$tmp/nope.json"
mv "$tmp/mt.gpipe.json" "$tmp/mt.gpipe.json.bak"
cmp_trace "--trace BASE missing one schedule's" "$tmp/mt.json: no such file, nor gpipe's trace beside it" "$tmp/mt.json"
mv "$tmp/mt.gpipe.json.bak" "$tmp/mt.gpipe.json"
cp "$tmp/mt.gpipe.json" "$tmp/other.1f1b.json"; cp "$tmp/mt.gpipe.json" "$tmp/other.gpipe.json"
cmp_trace "--trace BASE: a schedule's file holding another's trace" \
  "$tmp/other.1f1b.json: the trace is of schedule 'gpipe', not 1f1b" "$tmp/other.json"
mkdir "$tmp/tdir"
cmp_trace "--trace a directory" "$tmp/tdir: cannot read: is a directory" "$tmp/tdir"
mkfifo "$tmp/tfifo"
expect_command_error "--trace a FIFO with no writer" "$tmp/tfifo: cannot read: a FIFO, not a regular file" "" \
  timeout 20 "$sc" compare "$tmp/tp.json" "$tmp/tm.json" --trace "$tmp/tfifo"
cmp_trace "--trace a prediction's trace" "source is 'predicted': replay needs a measured trace" "$tmp/sim.1f1b.json"
"$sc" simulate "$root/scenarios/uniform-costs.yaml" --set pipeline.schedule=1f1b --json "$tmp/tp1.json" >/dev/null
expect_error "--trace of a schedule the prediction lacks" \
  "$tmp/mt.gpipe.json: the trace is of schedule 'gpipe', which $tmp/tp1.json does not hold" \
  compare "$tmp/tp1.json" "$tmp/tm.json" --trace "$tmp/mt.gpipe.json"
# Broken traces of 1f1b (its fourth compute event edited or gone; no events): the first bad
# event, or the first missing op, is named and nothing is split.
event="$(broken_traces "$tmp/mt.1f1b.json" "$tmp/" .1f1b.json)"
cmp_trace "--trace: a negative dur" "neg.1f1b.json: event $event: \"dur\" is negative (-5)" "$tmp/neg.1f1b.json"
cmp_trace "--trace: a dur that is text" "abc.1f1b.json: event $event: \"dur\" is not a number (\"abc\")" "$tmp/abc.1f1b.json"
cmp_trace "--trace: a dur beyond a double" "big.1f1b.json: event $event: \"dur\" is out of range" "$tmp/big.1f1b.json"
cmp_trace "--trace: an op removed" "drop.1f1b.json: rank 0 op " "$tmp/drop.1f1b.json"
check "--trace: the op removed is named as the trace had it" \
  'grep -qE "rank 0 op [0-9]+ \((F|B) of stage 0, microbatch [0-9]+, step 0\) of 1f1b is not in the trace" "$tmp/err"'
cmp_trace "--trace: no events" "empty.1f1b.json: no op in traceEvents" "$tmp/empty.1f1b.json"

# ---- times at the edges: a 0 ms prediction compares; throughput keeps its digits ----------------
# A zero-cost scenario simulates in 0 ms: simulate prints no throughput for it ("-"), compare takes
# it as a prediction (-100% step time, throughput error n/a) and refuses it as a measurement.
"$sc" simulate "$root/scenarios/uniform-costs.yaml" --set pipeline.schedule=gpipe --set model.costs.forward=0 \
  --set model.costs.backward_input=0 --set model.costs.backward_weight=0 --json "$tmp/zero.json" >"$tmp/zero.out"
check "simulate 0 ms: no throughput" 'grep -qE "^gpipe +0\.000 ms +- samples/s " "$tmp/zero.out"'
out="$("$sc" compare "$tmp/zero.json" "$tmp/tm.json" 2>&1)"; rc=$?
check "compare a 0 ms prediction: exit 0" '[[ $rc -eq 0 ]]'
check "compare a 0 ms prediction: -100.0% step, throughput n/a" \
  'grep -qE "^  step time \(ms\) +0\.000 +33\.000 +-100\.0%$" <<<"$out" && grep -qE "^  throughput \(samples/s\) +- +242\.4 +n/a$" <<<"$out"'
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["source"]="measured"; json.dump(d, open(sys.argv[2], "w"))' \
  "$tmp/zero.json" "$tmp/zero-measured.json"
expect_error "a 0 ms measurement" "zero-measured.json: schedules[0].step_time_ms: must be > 0 as the measured run" \
  compare "$tmp/tp.json" "$tmp/zero-measured.json"
# 8 samples in a 196 s step: 8 / 196 = 0.0408 samples/s, not "0.0".
python3 - "$tmp/tm.json" "$tmp/slow.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["schedules"]:
    s["step_time_ms"], s["throughput_samples_per_s"] = 196000.0, 8 / 196
json.dump(d, open(sys.argv[2], "w"))
PY
out="$("$sc" compare "$tmp/tp.json" "$tmp/slow.json" 2>&1)"
check "a 196 s step: 0.0408 samples/s" 'grep -qE "^  throughput \(samples/s\) +242\.4 +0\.0408 " <<<"$out"'
exit $fail
