#!/usr/bin/env bash
# What-if against reality (issue 31): for every schedule at the scenario's microbatch count and
# at half and twice it, execute the base schedule (1F1B), replay it into that what-if
# (`stagecraft replay --set ...`: each stage's pass times are the base run's medians, scaled by
# how the profile's cost model says each pass changes between the two schedules), execute the
# what-if right after, and compare.
#
# The replay knows the op times of its base run only. When the machine's speed moved between
# the base run and the what-if's run, the what-if is off by that much whatever the model, so
# every pair reports its op-time drift: the change of the stages' median F from the base run
# to the what-if's run (the one pass every schedule runs the same way; GPipe's many stashes
# slow its F too, which counts as drift). Pairs whose drift stays under 2% are where the
# what-if's own error shows; the summary gives the median and largest |error| over those and
# over all.
# A benchmark, not a test: it exits 0 whatever the errors (non-zero only when a run fails).
#
# Usage: scripts/what-if.sh [RUNS] [SCENARIO]   (default 2 and scenarios/mlp-cpu.yaml; a
#        scenario the CPU executor runs); everything lands in build/out/what-if/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="$root/build/cli/stagecraft"
out="$root/build/out/what-if"
runs="${1:-2}"
scenario="${2:-$root/scenarios/mlp-cpu.yaml}"
base_schedule=1f1b
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [RUNS] [SCENARIO]" >&2; exit 2; }
[[ -x "$sc" ]] || { echo "missing $sc: run scripts/build.sh first" >&2; exit 1; }
[[ -f "$scenario" ]] || { echo "$scenario: no such scenario" >&2; exit 2; }
ranks="$(sed -n 's/^ *ranks: *\([0-9]*\).*/\1/p' "$scenario" | head -1)"
m="$(sed -n 's/^ *microbatches: *\([0-9]*\).*/\1/p' "$scenario" | head -1)"
[[ -n "$ranks" && -n "$m" ]] || { echo "$scenario: no pipeline.ranks or pipeline.microbatches line" >&2; exit 2; }
counts=("$m" $((m / 2)) $((2 * m)))
rm -rf "$out"
mkdir -p "$out"
read -r load1 _ < /proc/loadavg
echo "scenario $scenario: base $base_schedule at $m microbatches, what-ifs: every schedule at ${counts[*]}" \
     "microbatches; $runs run(s), $(nproc) cores, 1-minute load $load1 at the start"

# Runs a command with its output in $1 (a log); a failure prints the log's tail and ends the script.
logged() {
  local log="$1"
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "failed: $*" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}

# The profile measures what one run of one schedule cannot show: I and W apart (a 1F1B run has
# only B) and the STEP of a schedule that steps every microbatch; the replay takes from it how a
# pass changes from the base schedule to another, and from the base run each pass's level.
logged "$out/profile.log" "$root/scripts/mpirun.sh" "$ranks" "$sc" profile "$scenario" --out "$out/profile.yaml"

# Every what-if is its own pair: the base schedule executed, replayed into the what-if, and the
# what-if executed right after, so the two runs of a pair see the machine at nearly one speed
# (a shared machine's speed moves by several percent over a minute).
"$sc" simulate "$scenario" --set pipeline.schedule=all --json "$out/names.json" >/dev/null
read -r -a names < <(python3 -c 'import json, sys; print(" ".join(s["schedule"] for s in json.load(open(sys.argv[1]))["schedules"]))' "$out/names.json")
for ((k = 1; k <= runs; ++k)); do
  d="$out/run$k"
  mkdir -p "$d"
  for mb in "${counts[@]}"; do
    for name in "${names[@]}"; do
      p="$d/$name.$mb"
      logged "$p.base.log" "$root/scripts/mpirun.sh" "$ranks" "$sc" execute "$scenario" \
        --set pipeline.schedule="$base_schedule" --json "$p.base.json" --trace "$p.base.trace.json"
      # The prediction first, from the base run alone; then the run it predicts.
      logged "$p.whatif.log" "$sc" replay "$p.base.json" --trace "$p.base.trace.json" \
        --set pipeline.schedule="$name" --set pipeline.microbatches="$mb" --set model.profile="$out/profile.yaml" \
        --json "$p.whatif.json"
      logged "$p.measured.log" "$root/scripts/mpirun.sh" "$ranks" "$sc" execute "$scenario" \
        --set pipeline.schedule="$name" --set pipeline.microbatches="$mb" --json "$p.measured.json"
      logged "$p.compare.log" "$sc" compare "$p.whatif.json" "$p.measured.json" --json "$p.compare.json"
    done
  done
  echo "run $k done"
done

python3 - "$out" "$runs" "${#names[@]}" "${names[@]}" "${counts[@]}" <<'EOF'
import json, statistics, sys
out, runs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names, counts = sys.argv[4:4 + n], [int(x) for x in sys.argv[4 + n:]]

def forward_ms(schedule):
    # The stages' median F summed: the machine's speed on the one pass every schedule runs alike.
    return sum(s["forward_ms"] for s in schedule["stages"])

def first(path):
    return json.load(open(path))["schedules"][0]

rows = []
for k in range(1, runs + 1):
    for mb in counts:
        for name in names:
            p = f"{out}/run{k}/{name}.{mb}"
            f0 = forward_ms(first(f"{p}.base.json"))
            c = first(f"{p}.compare.json")
            drift = 100 * (forward_ms(first(f"{p}.measured.json")) - f0) / f0
            rows.append((k, name, mb, c["step_time_ms"]["predicted"], c["step_time_ms"]["measured"],
                         c["step_time_ms"]["error_pct"], c["bubble_fraction"]["error_pp"], drift))
print()
print(f"{'run':>3} {'schedule':<12} {'mb':>3} {'what-if ms':>10} {'measured ms':>11} {'error':>7} {'bubble err':>10}"
      f" {'F drift':>8}")
for k, name, mb, pred, meas, err, bub, drift in rows:
    held = "" if abs(drift) < 2 else "  (drifted)"
    print(f"{k:>3} {name:<12} {mb:>3} {pred:>10.3f} {meas:>11.3f} {err:>+6.1f}% {bub:>+7.1f} pp {drift:>+7.1f}%{held}")
print()
def line(label, rs):
    if not rs:
        print(f"{label}: none")
        return
    e = [abs(r[5]) for r in rs]
    print(f"{label}: {len(rs)} runs, what-if |step-time error| median {statistics.median(e):.1f}%, largest "
          f"{max(e):.1f}%; largest |bubble error| {max(abs(r[6]) for r in rs):.1f} pp")
held = [r for r in rows if abs(r[7]) < 2]
line("where the machine's speed held (|F drift| < 2%)", held)
line("all", rows)
print("target (issue 31): median <= 3% where the speed held")
print("F drift: the executed run's stages' median F against the base run's (the machine's speed moving)")
EOF
