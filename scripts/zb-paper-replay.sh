#!/usr/bin/env bash
# Replays the Zero Bubble paper's cost model (Qi et al., "Zero Bubble (Almost) Pipeline
# Parallelism", ICLR 2024, §5.3) with `stagecraft simulate` for every setting of its Table 5:
# the profiled T_F, T_B, T_W, T_comm of Appendix D (Table 9) go into
# scenarios/zero-bubble-paper.yaml as explicit per-rank costs, receives are posted ahead and a
# transfer costs only its latency. The paper's bubble rate is (cost - m (T_F+T_B+T_W)) / cost,
# cost = the largest per-rank span (first F start to last pass end). Interleaved 1F1B uses one
# transformer layer per chunk as in §5.1 (3, 4, 3, 2 chunks).
# Prints simulated vs paper per schedule; exits 1 if 1F1B, ZB-H1 or ZB-H2 differ by more than
# 1e-4 (the 1F1B-I column is reported, see README "Zero Bubble cost model").
# Usage: scripts/zb-paper-replay.sh   (builds first if needed)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="$root/build/cli/stagecraft"
[[ -x "$sc" ]] || "$root/scripts/build.sh" >/dev/null
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
python3 - "$sc" "$root/scenarios/zero-bubble-paper.yaml" "$tmp" <<'PY'
import json, subprocess, sys
sc, scenario, tmp = sys.argv[1:]
# Table 9 (ms): model, p, m, T_F, T_B, T_W, T_comm, chunks for 1F1B-I; then Table 5's
# 1F1B, 1F1B-I, ZB-H1, ZB-H2 bubble rates.
rows = [
    ("1.5B", 8, 24, 18.522, 18.086, 9.337, 0.601, 3, (0.2431, 0.1055, 0.1585, 0.1083)),
    ("1.5B", 8, 32, 18.513, 18.086, 9.331, 0.626, 3, (0.1985, 0.0818, 0.1242, 0.0837)),
    ("1.5B", 8, 64, 18.546, 18.097, 9.321, 0.762, 3, (0.1240, 0.0443, 0.0674, 0.0444)),
    ("6.2B", 8, 24, 29.718, 29.444, 19.927, 0.527, 4, (0.2347, 0.0808, 0.1323, 0.0698)),
    ("6.2B", 8, 32, 29.802, 29.428, 19.530, 0.577, 4, (0.1898, 0.0628, 0.1045, 0.0559)),
    ("6.2B", 8, 64, 29.935, 29.621, 19.388, 0.535, 4, (0.1091, 0.0320, 0.0554, 0.0294)),
    ("14.6B", 16, 48, 11.347, 11.248, 8.132, 0.377, 3, (0.2552, 0.1104, 0.1397, 0.0672)),
    ("14.6B", 16, 64, 11.307, 11.254, 8.101, 0.379, 3, (0.2082, 0.0852, 0.1088, 0.0516)),
    ("14.6B", 16, 128, 11.325, 11.308, 8.109, 0.378, 3, (0.1251, 0.0445, 0.0576, 0.0266)),
    ("28.3B", 32, 96, 10.419, 10.207, 7.715, 0.408, 2, (0.2646, 0.1493, 0.1421, 0.0641)),
    ("28.3B", 32, 128, 10.408, 10.204, 7.703, 0.408, 2, (0.2168, 0.1164, 0.1106, 0.0490)),
    ("28.3B", 32, 256, 10.402, 10.248, 7.698, 0.460, 2, (0.1352, 0.0624, 0.0594, 0.0257)),
]
names = ["1f1b", "interleaved", "zb-h1", "zb-h2"]
must_match = {"1f1b", "zb-h1", "zb-h2"}

def simulate(p, m, f, b, w, c, schedules, chunks):
    out = f"{tmp}/out.json"
    args = [sc, "simulate", scenario, "--json", out,
            "--set", f"topology.devices_per_node={p}", "--set", f"pipeline.ranks={p}",
            "--set", f"pipeline.microbatches={m}", "--set", f"pipeline.chunks={chunks}",
            "--set", f"pipeline.schedule=[{','.join(schedules)}]",
            "--set", f"model.costs.forward={f}ms", "--set", f"model.costs.backward_input={b}ms",
            "--set", f"model.costs.backward_weight={w}ms", "--set", f"model.costs.p2p_latency={c}ms"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    with open(out) as fh:
        result = json.load(fh)
    ideal = m * (f + b + w)
    rates = {}
    for s in result["schedules"]:
        cost = max(r["span_ms"] for r in s["per_rank"])
        rates[s["schedule"]] = (cost - ideal) / cost
    return rates

print(f"{'model':>6} {'p':>3} {'m':>4}  " + "  ".join(f"{n:>22}" for n in ["1F1B", "1F1B-I", "ZB-H1", "ZB-H2"]))
print(f"{'':>15}" + "  ".join(f"{'sim / paper / diff':>22}" for _ in names))
worst = {n: 0.0 for n in names}
for model, p, m, f, b, w, c, v, paper in rows:
    rates = simulate(p, m, f, b, w, c, ["1f1b", "zb-h1", "zb-h2"], 1)
    rates.update(simulate(p, m, f, b, w, c, ["interleaved"], v))
    cells = []
    for n, want in zip(names, paper):
        got = rates[n]
        worst[n] = max(worst[n], abs(got - want))
        cells.append(f"{got:.4f} / {want:.4f} / {got - want:+.4f}")
    print(f"{model:>6} {p:>3} {m:>4}  " + "  ".join(f"{cell:>22}" for cell in cells))
print("largest |sim - paper|: " + ", ".join(f"{n} {worst[n]:.5f}" for n in names))
bad = [n for n in must_match if worst[n] > 1e-4]
if bad:
    print("MISMATCH beyond 1e-4: " + ", ".join(sorted(bad)))
    sys.exit(1)
PY
