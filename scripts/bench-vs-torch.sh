#!/usr/bin/env bash
# stagecraft's CPU executor against PyTorch 1.13 (Debian python3-torch, installed here if
# missing; the build and the tests never need it), side by side in one run on this machine:
#   1. per-layer F, I, W: `stagecraft profile` vs the same math in PyTorch, one thread each;
#   2. the main scenario (scenarios/mlp-cpu.yaml, 2 ranks) vs PyTorch with no pipeline on 1 core
#      and on 2 BLAS threads, same model, Adam, the same 8 x 64 microbatches per step;
#   3. MLP 8 x Linear(1024) + ReLU, batch 256 as 4 microbatches, 2 ranks, vs a PyTorch GPipe
#      over two gloo processes (loopback);
#   4. each schedule of the main scenario against the ideal the simulator predicts from
#      stagecraft's own per-layer profile, taken just before and just after that schedule runs;
#   5. the transformer (scenarios/gpt-tiny-cpu.yaml): one block's forward and backward, and a
#      whole training step on one rank, against the same GPT written in PyTorch, one thread
#      each; and every schedule on 2 ranks against that PyTorch step.
# End-to-end numbers are the median of REPEATS runs (default 3) with their min..max spread.
# Usage: scripts/bench-vs-torch.sh [REPEATS] [--gpt | --ideal]   (section 5 or section 4 alone)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repeats="${1:-3}"
only_gpt=0 only_ideal=0
case "${2:-}" in
  "") ;;
  --gpt) only_gpt=1 ;;
  --ideal) only_ideal=1 ;;
  *) echo "usage: $0 [REPEATS] [--gpt | --ideal]" >&2; exit 2 ;;
esac
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [REPEATS] [--gpt | --ideal]" >&2; exit 2; }
py=/usr/bin/python3  # Debian's interpreter, where python3-torch lives
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "bench-vs-torch: installing python3-torch (benchmark only)" >&2
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" >/dev/null
sc="$root/build/cli/stagecraft"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
scenario="$root/scenarios/mlp-cpu.yaml"
wide=(--set model.mlp.hidden=1024 --set model.mlp.activation=relu --set pipeline.microbatch_size=64
      --set pipeline.microbatches=4 --set pipeline.steps=10)

torch1() { OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$py" "$root/scripts/bench_vs_torch.py" "$@"; }
torch_blas2() { OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2 "$py" "$root/scripts/bench_vs_torch.py" "$@"; }
# samples: the samples_per_s of the JSON object on stdin.
samples() { "$py" -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])'; }

# per_schedule JSON...: one line per schedule, "name median min..max" of its samples/s over the
# execute --json files given (one per repeat).
per_schedule() {
  "$py" - "$@" <<'PY'
import json, statistics, sys
runs = {}
for path in sys.argv[1:]:
    for s in json.load(open(path))["schedules"]:
        runs.setdefault(s["schedule"], []).append(s["throughput_samples_per_s"])
for name, v in runs.items():
    print(name, f"{statistics.median(v):.1f}", f"{min(v):.1f}..{max(v):.1f}")
PY
}
# report PEER_NAME PEER_MEDIAN JSON...: the schedules' samples/s and each one's ratio to the peer.
report() {
  local peer="$1" peer_median="$2"; shift 2
  while read -r name median range; do
    "$py" -c 'import sys; n,m,r,p,pn=sys.argv[1],float(sys.argv[2]),sys.argv[3],float(sys.argv[4]),sys.argv[5]; print(f"stagecraft {n:<12} {m:10.1f}  ({r})  {m/p:.2f}x {pn}")'       "$name" "$median" "$range" "$peer_median" "$peer"
  done < <(per_schedule "$@")
}
# stats V...: "median min..max" of numbers.
stats() { "$py" -c 'import statistics,sys; v=sorted(map(float,sys.argv[1:])); print(f"{statistics.median(v):.1f} {v[0]:.1f}..{v[-1]:.1f}")' "$@"; }

# Section 5: the transformer.
gpt_section() {
  local gpt="$root/scenarios/gpt-tiny-cpu.yaml"
  # The scenario's shape, as bench_vs_torch.py takes it: L C NH T V B M.
  read -r L C NH T V B M < <("$py" - "$gpt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
t = dict(re.findall(r"(\w+): (\d+)", re.search(r"transformer: \{([^}]*)\}", text).group(1)))
get = lambda key: re.search(rf"^\s*{key}: (\d+)", text, re.M).group(1)
print(t["layers"], t["hidden"], t["heads"], t["seq"], t["vocab"], get("microbatch_size"), get("microbatches"))
PY
)
  echo "== 5/5 transformer (gpt-tiny-cpu: $L blocks, hidden $C, $NH heads, seq $T, vocab $V; $M x $B sequences per Adam step)"
  "$sc" profile "$gpt" --calibration-steps 0 --out "$tmp/gpt-profile.yaml" >/dev/null
  read -r f bw < <("$py" - "$tmp/gpt-profile.yaml" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().split("layers:")[1].split("embedding:")[0].splitlines()
rows = [l for l in lines if "forward:" in l]
get = lambda l, key: int(re.search(key + r": (\d+)ns", l).group(1)) / 1e3
print(statistics.median(get(l, "forward") for l in rows),
      statistics.median(get(l, "backward_input") + get(l, "backward_weight") for l in rows))
PY
)
  t="$(torch1 gpt_block "$C" "$NH" "$T" "$B")"
  read -r tf tb < <("$py" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["forward_us"], d["backward_us"])' "$t")
  printf '%-34s %10s %10s %10s %10s\n' "one block, one thread (median us)" "F ours" "F torch" "B ours" "B torch"
  "$py" -c 'import sys; f,tf,b,tb=map(float,sys.argv[1:]); print(" " * 34, f"{f:10.0f} {tf:10.0f} {b:10.0f} {tb:10.0f}   ours/torch F {f/tf:.2f} B {b/tb:.2f}")' \
    "$f" "$tf" "$bw" "$tb"
  local ours=() peer=()
  for ((k = 0; k < repeats; ++k)); do
    "$sc" execute "$gpt" --set pipeline.ranks=1 --set pipeline.schedule=gpipe --json "$tmp/gpt1.$k.json" >/dev/null
    ours+=("$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["schedules"][0]["step_time_ms"])' "$tmp/gpt1.$k.json")")
    peer+=("$(torch1 gpt_train "$L" "$C" "$NH" "$T" "$V" "$B" "$M" 5 | "$py" -c 'import json,sys; print(json.load(sys.stdin)["step_ms"])')")
    "$root/scripts/mpirun.sh" 2 "$sc" execute "$gpt" --json "$tmp/gpt2.$k.json" >/dev/null
  done
  read -r om or_ < <(stats "${ours[@]}"); read -r pm pr < <(stats "${peer[@]}")
  printf '%-34s %10s  (%s)\n' "PyTorch step, one thread (ms)" "$pm" "$pr"
  printf '%-34s %10s  (%s)  %s x PyTorch'"'"'s time\n' "stagecraft step, one rank (ms)" "$om" "$or_" \
    "$("$py" -c 'import sys; print(f"{float(sys.argv[1])/float(sys.argv[2]):.2f}")' "$om" "$pm")"
  local peer_samples
  peer_samples="$("$py" -c 'import sys; print(f"{float(sys.argv[3]) * float(sys.argv[2]) * 1e3 / float(sys.argv[1]):.1f}")' "$pm" "$B" "$M")"
  echo "2 ranks, samples/s against the PyTorch step on one thread ($peer_samples samples/s):"
  report "PyTorch, one thread" "$peer_samples" "$tmp"/gpt2.*.json
}
# Section 4: every schedule against the ideals from profiles taken just before and just after it runs.
ideal_section() {
  local runs run name chunks one k n=0
  local long=(--set pipeline.steps="${IDEAL_STEPS:-60}") profile_repeats="${IDEAL_PROFILE_REPEATS:-60}"
  echo "== 4/5 every schedule of the main scenario against the ideal from its own profile"
  # The schedules `all` runs, with the chunks it gives each.
  "$sc" simulate "$scenario" --json "$tmp/all.json" >/dev/null
  mapfile -t runs < <("$py" -c 'import json,sys; [print(s["schedule"], s["chunks"]) for s in json.load(open(sys.argv[1]))["schedules"]]' "$tmp/all.json")
  # The layers alone (no calibration): the ideal is a pipeline with no runtime cost beyond them.
  # Profiles alternate with runs (profile, run, profile, run, ..., profile), and each run is
  # held against both profiles around it: the machine's speed drifts on a shared host, and a
  # profile taken only before a run would charge that drift to whichever schedule ran then.
  profile_at() {
    "$root/scripts/mpirun.sh" 2 "$sc" profile "$scenario" "${long[@]}" --calibration-steps 0 --repeats "$profile_repeats" \
      --out "$tmp/profile.$1.yaml" >/dev/null
  }
  profile_at 0
  for ((k = 0; k < repeats; ++k)); do
    for run in "${runs[@]}"; do
      read -r name chunks <<<"$run"
      one=(--set pipeline.schedule="$name" --set pipeline.chunks="$chunks" "${long[@]}")
      "$root/scripts/mpirun.sh" 2 "$sc" execute "$scenario" "${one[@]}" --json "$tmp/measured.$k.$name.json" >/dev/null
      n=$((n + 1))
      profile_at "$n"
      "$sc" simulate "$scenario" "${one[@]}" --set model.profile="$tmp/profile.$((n - 1)).yaml" \
        --json "$tmp/ideal.before.$k.$name.json" >/dev/null
      "$sc" simulate "$scenario" "${one[@]}" --set model.profile="$tmp/profile.$n.yaml" \
        --json "$tmp/ideal.after.$k.$name.json" >/dev/null
    done
  done
  "$py" - "$repeats" "$tmp" "${runs[@]}" <<'PY'
import json, statistics, sys
repeats, tmp, names = int(sys.argv[1]), sys.argv[2], [r.split()[0] for r in sys.argv[3:]]
first = lambda path: json.load(open(path))["schedules"][0]
samples = lambda path: first(path)["throughput_samples_per_s"]
print("of ideal: each run's samples/s against the mean of the ideals from the profiles just before and just after it;")
print("median step: the same with the run's median step time in place of its mean (a step the host slowed counts once).")
print(f"{'schedule':<12} {'of ideal':>9} {'(min..max)':>14} {'median step':>12} {'(min..max)':>14}   every run; ideal after/before")
for name in names:
    v, vm, drift = [], [], []
    for k in range(repeats):
        before, after = (samples(f"{tmp}/ideal.{side}.{k}.{name}.json") for side in ("before", "after"))
        ideal = (before + after) / 2
        m = first(f"{tmp}/measured.{k}.{name}.json")
        v.append(100 * m["throughput_samples_per_s"] / ideal)
        vm.append(100 * m["throughput_samples_per_s"] * m["step_time_ms"] / statistics.median(m["step_ms"]) / ideal)
        drift.append(100 * (after / before - 1))
    print(f"{name:<12} {statistics.median(v):8.1f}% {f'({min(v):.1f}..{max(v):.1f})':>14} {statistics.median(vm):11.1f}% "
          f"{f'({min(vm):.1f}..{max(vm):.1f})':>14}   " + " ".join(f"{x:.1f}" for x in v)
          + "; " + " ".join(f"{x:+.1f}%" for x in drift))
PY
}
if [[ $only_gpt -eq 1 ]]; then
  gpt_section
  exit 0
fi
if [[ $only_ideal -eq 1 ]]; then
  ideal_section
  exit 0
fi

echo "== 1/5 per-layer times, one thread (median us)"
printf '%-26s %10s %10s %10s %10s %10s %10s\n' "layer" "F ours" "F torch" "I ours" "I torch" "W ours" "W torch"
for shape in "512 gelu" "1024 relu"; do
  set -- $shape
  "$sc" profile "$scenario" --set model.mlp.hidden="$1" --set model.mlp.activation="$2" \
    --out "$tmp/profile.yaml" >/dev/null
  read -r f i w < <("$py" - "$tmp/profile.yaml" <<'PY'
import re, statistics, sys
rows = [l for l in open(sys.argv[1]) if "forward:" in l]
get = lambda key: statistics.median(int(re.search(key + r": (\d+)ns", l).group(1)) for l in rows) / 1e3
print(get("forward"), get("backward_input"), get("backward_weight"))
PY
)
  t="$(torch1 layers "$1" 64 "$2")"
  read -r tf ti tw < <("$py" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["forward_us"], d["backward_input_us"], d["backward_weight_us"])' "$t")
  "$py" -c 'import sys; n,f,tf,i,ti,w,tw=sys.argv[1],*map(float,sys.argv[2:]); print(f"{n:<26} {f:10.1f} {tf:10.1f} {i:10.1f} {ti:10.1f} {w:10.1f} {tw:10.1f}   ours/torch F {f/tf:.2f} I {i/ti:.2f} W {w/tw:.2f}")' \
    "Linear($1)+$2 [64x$1]" "$f" "$tf" "$i" "$ti" "$w" "$tw"
done

echo
echo "== 2/5 main scenario (mlp-cpu: 8 x Linear(512)+GELU, 8 x 64 per Adam step), samples/s"
t1=(); t2=()
for ((k = 0; k < repeats; ++k)); do
  "$root/scripts/mpirun.sh" 2 "$sc" execute "$scenario" --json "$tmp/main.$k.json" >/dev/null
  t1+=("$(torch1 train 512 8 64 8 20 gelu 1 | samples)")
  t2+=("$(torch_blas2 train 512 8 64 8 20 gelu 1 | samples)")
done
read -r t1m t1r < <(stats "${t1[@]}"); read -r t2m t2r < <(stats "${t2[@]}")
printf '%-34s %10s  (%s)\n' "PyTorch, no pipeline, 1 thread" "$t1m" "$t1r"
printf '%-34s %10s  (%s)\n' "PyTorch, no pipeline, 2 BLAS threads" "$t2m" "$t2r"
report "PyTorch on 2 BLAS threads" "$t2m" "$tmp"/main.*.json

echo
echo "== 3/5 MLP 8 x Linear(1024)+ReLU, batch 256 as 4 x 64, 2 ranks, samples/s"
tg=()
for ((k = 0; k < repeats; ++k)); do
  "$root/scripts/mpirun.sh" 2 "$sc" execute "$scenario" "${wide[@]}" --json "$tmp/wide.$k.json" >/dev/null
  tg+=("$(torch1 gpipe 1024 8 64 4 10 relu | samples)")
done
read -r tgm tgr < <(stats "${tg[@]}")
printf '%-34s %10s  (%s)\n' "PyTorch GPipe, two gloo processes" "$tgm" "$tgr"
report "PyTorch GPipe" "$tgm" "$tmp"/wide.*.json

echo
ideal_section

echo
gpt_section
