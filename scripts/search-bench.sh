#!/usr/bin/env bash
# Issue 32's targets for `stagecraft search`, measured (a benchmark, not a test: it exits 0
# whatever the numbers, non-zero only when a command fails):
#   1. Table 5: on every setting of the Zero Bubble paper's cost model, the search within 2p
#      forwards' activations against ZB-2p's bubble rate, within p against ZB-1p's (the rate as
#      the paper defines it: 1 - m (T_F+T_B+T_W) / the largest per-rank span, a long run's step:
#      the searches judge a run of 1000 steps);
#   2. uneven stages: the paper's 1.5B costs with the last stage 1.5x the others, and
#      gpt-1.3b-8xh100.yaml with partition: even (its last stage carries the LM head), against
#      the best hand-written flush schedule that fits (the others train differently), per step
#      of a 1000-step run and one step alone; beside each the bound no op order can beat
#      (search.h, PlacementBoundNs), so the largest gain possible;
#   3. the CPU executor's main scenario (mlp-cpu.yaml): profiled here, searched on that profile,
#      then every hand-written flush schedule and the searched one executed together, RUNS
#      times; median throughput of each, and the searched one's ratio to the best hand one;
#      then that best hand schedule, the searched one and a control (the best hand schedule's
#      own order as a schedule file) on 2 x RUNS fresh runs (the best of seven noisy medians,
#      compared on the runs it was chosen on, is biased high; the control's ratio to the best
#      hand schedule is the measurement's resolution);
#   4. a search for 8 ranks x 32 microbatches (gpt-1.3b-8xh100.yaml) on one core: wall time.
# Usage: scripts/search-bench.sh [BUDGET_S] [RUNS]   (default 2 s per search, 5 runs; the
# environment's SEARCH_BENCH_PARTS picks parts, default 1234); output lands in
# build/out/search-bench/. Part 3 measures: run it on a quiet machine (the 1-minute load is
# printed first; another busy process halves a 2-rank run on 2 cores).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="$root/build/cli/stagecraft"
budget="${1:-2}"
runs="${2:-5}"
[[ "$budget" =~ ^[0-9]+(\.[0-9]+)?$ && "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [BUDGET_S] [RUNS]" >&2; exit 2; }
[[ -x "$sc" ]] || { echo "missing $sc: run scripts/build.sh first" >&2; exit 1; }
out="$root/build/out/search-bench"
rm -rf "$out"
mkdir -p "$out"
read -r load1 _ < /proc/loadavg
echo "search-bench: $budget s per search, $runs executor run(s), $(nproc) cores, 1-minute load $load1"

parts="${SEARCH_BENCH_PARTS:-1234}"
PYTHONPATH="$root/scripts${PYTHONPATH:+:$PYTHONPATH}" \
python3 - "$sc" "$root" "$out" "$budget" "$runs" "$parts" <<'PY'
import json, statistics, subprocess, sys, time
import data_table  # tests/data's tables
sc, root, out, budget, runs, parts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
paper = f"{root}/scenarios/zero-bubble-paper.yaml"
HAND = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"]  # flush policy, hand-written
LONG = ["--set", "pipeline.steps=1000"]  # what the searches of parts 1 and 2 judge: a long run

def run(args, log):
    with open(log, "w") as fh:
        r = subprocess.run(args, stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        print(open(log).read()[-3000:])
        sys.exit(f"failed: {' '.join(args)}")
    return open(log).read()

def rate(s, ideal):  # the paper's bubble rate
    cost = max(r["span_ms"] for r in s["per_rank"])
    return (cost - ideal) / cost

rows = data_table.rows(f"{root}/data/zero_bubble_paper.csv")

# 1. Table 5.
if "1" in parts:
    print("\n== 1. Table 5 settings: search (from the best generator, %s s) vs the automatic scheduler" % budget)
    print(f"{'model':>6} {'p':>3} {'m':>4}  {'ZB-1p':>7} {'search 1p':>10} {'start':>8}  {'ZB-2p':>7} {'search 2p':>10} {'start':>8}")
    misses = 0
    for row in rows:
        p, m = int(row["p"]), int(row["m"])
        f, b, w, c = (int(row[k]) / 1000 for k in ("f_us", "b_us", "w_us", "comm_us"))
        sets = ["--set", f"topology.devices_per_node={p}", "--set", f"pipeline.ranks={p}", "--set", f"pipeline.microbatches={m}",
                "--set", f"model.costs.forward={f}ms", "--set", f"model.costs.backward_input={b}ms",
                "--set", f"model.costs.backward_weight={w}ms", "--set", f"model.costs.p2p_latency={c}ms"]
        ideal = m * (f + b + w)
        tag = f"{row['model']}-{m}"
        run([sc, "simulate", paper, *sets, "--set", "pipeline.steps=1", "--set", "pipeline.schedule=[zb-1p,zb-2p]",
             "--json", f"{out}/{tag}.zb.json"], f"{out}/{tag}.zb.log")
        zb = {s["schedule"]: rate(s, ideal) for s in json.load(open(f"{out}/{tag}.zb.json"))["schedules"]}
        cells = []
        for k, ref in (("1p", zb["zb-1p"]), ("2p", zb["zb-2p"])):
            text = run([sc, "search", paper, *sets, *LONG, "--memory-limit", k, "--budget", budget, "--out", f"{out}/{tag}.{k}.csv",
                        "--json", f"{out}/{tag}.{k}.json"], f"{out}/{tag}.{k}.log")
            start = text.split("start: ", 1)[1].split(" ", 1)[0]
            got = rate(json.load(open(f"{out}/{tag}.{k}.json"))["schedules"][1], ideal)
            misses += got > ref + 1e-9
            cells.append(f"{ref:>7.4f} {got:>10.4f} {start:>8}")
        print(f"{row['model']:>6} {p:>3} {m:>4}  " + "  ".join(cells))
    print(f"target (search at or below ZB-1p at 1p and ZB-2p at 2p): {'met on every setting' if misses == 0 else f'missed {misses} time(s)'}")

# 2. Uneven stages.
if "2" in parts:
    print("\n== 2. uneven stages: search vs the best hand-written flush schedule that fits (target: 5% shorter)")
    r = rows[0]
    f, b, w = (int(r[k]) / 1000 for k in ("f_us", "b_us", "w_us"))
    def heavy_last(x):
        return "[" + ", ".join([f"{x}ms"] * 7 + [f"{1.5 * x:.4f}ms"]) + "]"
    cases = [
        ("paper 1.5B, last stage 1.5x", paper, ["--set", f"model.costs.forward={heavy_last(f)}",
                                               "--set", f"model.costs.backward_input={heavy_last(b)}",
                                               "--set", f"model.costs.backward_weight={heavy_last(w)}"]),
        ("gpt-1.3b-8xh100, partition even", f"{root}/scenarios/gpt-1.3b-8xh100.yaml", ["--set", "pipeline.partition=even"]),
    ]
    for name, scenario, sets in cases:
        tag = name.split(",")[0].replace(" ", "-")
        run([sc, "simulate", scenario, *sets, "--set", "pipeline.steps=1", "--set", f"pipeline.schedule=[{','.join(HAND)}]",
             "--json", f"{out}/{tag}.hand.json"], f"{out}/{tag}.hand.log")
        fits = [s for s in json.load(open(f"{out}/{tag}.hand.json"))["schedules"] if not s.get("oom", False)]
        # Both readings of "step time": per step of a 1000-step run (the first step's makespan,
        # then the largest per-rank span of one step per step: search.h, RunStepNs), and one
        # step alone (its makespan, as when every step ends in a barrier).
        for reading, steps in (("per step of 1000", 1000), ("one step alone", 1)):
            hand = [((s["makespan_ms"] + (steps - 1) * max(r["span_ms"] for r in s["per_rank"])) / steps, s["schedule"])
                    for s in fits]
            best_ms, best_name = min(hand)
            text = run([sc, "search", scenario, *sets, "--set", f"pipeline.steps={steps}", "--budget", budget,
                        "--out", f"{out}/{tag}.{steps}.csv"], f"{out}/{tag}.{steps}.search.log")
            searched = float(text.split("searched: ", 1)[1].split(" ", 1)[0])
            bound = float(text.split("can take under ", 1)[1].split(" ", 1)[0])
            gain = 100 * (1 - searched / best_ms)
            most = 100 * (1 - bound / best_ms)
            print(f"{name}, {reading}: best hand {best_name} {best_ms:.3f} ms, searched {searched:.3f} ms ({gain:+.2f}% shorter); "
                  f"no order of the generators' placements can beat {bound:.3f} ms, so at most {most:.2f}% shorter is possible: "
                  + ("target met" if gain >= 5 else "target not met" + (" (and out of reach of any order)" if most < 5 else "")))

# 3. The CPU executor.
if "3" in parts:
    print(f"\n== 3. mlp-cpu.yaml on this machine: profiled, searched on the profile, executed {runs} time(s)")
    scenario = f"{root}/scenarios/mlp-cpu.yaml"
    mpirun = f"{root}/scripts/mpirun.sh"
    run([mpirun, "2", sc, "profile", scenario, "--out", f"{out}/profile.yaml"], f"{out}/profile.log")
    prof = ["--set", f"model.profile={out}/profile.yaml"]
    text = run([sc, "search", scenario, *prof, "--budget", budget, "--out", f"{out}/mlp-cpu.searched.csv"], f"{out}/mlp-search.log")
    print("  " + text.split("searched: ", 1)[1].splitlines()[0].join(["searched: ", ""]) + "; start " + text.split("start: ", 1)[1].split(" ", 1)[0])
    names = HAND + [f"{out}/mlp-cpu.searched.csv"]
    tput = {}
    for i in range(runs):
        order = names if i % 2 == 0 else list(reversed(names))  # the order alternates: drift hits both ends alike
        run([mpirun, "2", sc, "execute", scenario, *prof, "--set", f"pipeline.schedule=[{','.join(order)}]",
             "--json", f"{out}/exec.{i}.json"], f"{out}/exec.{i}.log")
        for s in json.load(open(f"{out}/exec.{i}.json"))["schedules"]:
            key = "searched" if s["schedule"].endswith(".csv") else s["schedule"]
            tput.setdefault(key, []).append(s["throughput_samples_per_s"])
    med = {k: statistics.median(v) for k, v in tput.items()}
    best_hand = max((k for k in med if k != "searched"), key=lambda k: med[k])
    for k in sorted(med, key=lambda k: -med[k]):
        print(f"  {k:>12}: median {med[k]:8.1f} samples/s (runs {min(tput[k]):.1f}..{max(tput[k]):.1f})")
    ratios = [s / h for s, h in zip(tput["searched"], tput[best_hand])]
    print(f"  searched / best hand ({best_hand}), same runs: median {med['searched'] / med[best_hand]:.3f}, per run "
          f"{min(ratios):.3f}..{max(ratios):.3f} (biased towards the hand side: the best hand schedule is chosen on these runs)")
    # The hand schedule that measured best above is the best of seven noisy medians: chosen on
    # the same runs it is compared on, it measures high by that choice alone (a schedule as
    # fast as the searched one beats it in most runs of 7). So the two meet again on 2 x RUNS
    # fresh runs, with a control beside them: the best hand schedule's own order written as a
    # schedule file, as the searched one is. The control and the best hand schedule run the same
    # ops in the same order, so their measured ratio is the method's own resolution on this
    # machine (drift between the schedules of one run, and between runs). Each run executes the
    # three in one of the six orders, in turn.
    chunks = "2" if best_hand in ("interleaved", "zb-v", "dualpipe-v") else "1"
    control = f"{out}/mlp-cpu.{best_hand}.csv"
    with open(control, "w") as fh:
        fh.write(run([sc, "schedule", "--schedule", best_hand, "--ranks", "2", "--microbatches", "8", "--chunks", chunks,
                      "--format", "csv"], f"{out}/control.log"))
    searched = f"{out}/mlp-cpu.searched.csv"
    same_order = open(searched).read() == open(control).read()
    trio = {best_hand: best_hand, searched: "searched", control: "control"}
    fresh = {"searched": [], "control": [], best_hand: []}
    perms = [[0, 1, 2], [2, 1, 0], [1, 2, 0], [0, 2, 1], [2, 0, 1], [1, 0, 2]]
    for i in range(2 * runs):
        order = [list(trio)[j] for j in perms[i % 6]]
        run([mpirun, "2", sc, "execute", scenario, *prof, "--set", f"pipeline.schedule=[{','.join(order)}]",
             "--json", f"{out}/fresh.{i}.json"], f"{out}/fresh.{i}.log")
        got = {}
        for s in json.load(open(f"{out}/fresh.{i}.json"))["schedules"]:
            got[trio[s["schedule"]]] = s["throughput_samples_per_s"]
        for k in fresh:
            fresh[k].append(got[k])
    def ratio_line(k):
        r = sorted(a / b for a, b in zip(fresh[k], fresh[best_hand]))
        q1, q3 = r[len(r) // 4], r[(3 * len(r)) // 4]
        return statistics.median(r), q1, q3, r[0], r[-1]
    ms, s1, s3, slo, shi = ratio_line("searched")
    mc, c1, c3, clo, chi = ratio_line("control")
    print(f"  fresh runs ({2 * runs}), each of {best_hand}, the searched order and the control ({best_hand}'s own order "
          "as a schedule file) in turn:")
    print(f"    searched / {best_hand}: median {ms:.3f}, middle half {s1:.3f}..{s3:.3f}, per run {slo:.3f}..{shi:.3f}")
    print(f"    control  / {best_hand}: median {mc:.3f}, middle half {c1:.3f}..{c3:.3f}, per run {clo:.3f}..{chi:.3f}"
          " (equal orders: the method's resolution)")
    if same_order:
        print(f"  the search kept {best_hand}'s order (it found nothing shorter in the simulator): at the best hand "
              "schedule by construction; target (at or above) met by equality")
    elif ms >= 1:
        print("  target (at or above) met")
    elif ms >= c1:
        print(f"  target (at or above) not resolved: the searched order's median is within the control's middle half")
    else:
        print("  target (at or above) not met")

# 4. 8 ranks x 32 microbatches on one core.
if "4" in parts:
    print("\n== 4. search for 8 ranks x 32 microbatches (gpt-1.3b-8xh100.yaml) on one core, default budget")
    t = time.monotonic()
    text = run(["taskset", "-c", "0", sc, "search", f"{root}/scenarios/gpt-1.3b-8xh100.yaml", "--out", f"{out}/gpt.csv"],
               f"{out}/gpt-search.log")
    wall = time.monotonic() - t
    print("  " + text.split("searched: ", 1)[1].splitlines()[0].join(["searched: ", ""]))
    print(f"  wall time {wall:.2f} s: target (within 10 s) {'met' if wall <= 10 else 'not met'}")
PY
