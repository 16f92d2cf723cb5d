#!/usr/bin/env bash
# The roofline model's kernel list against one GPU, kernel by kernel (issue 30, point 6;
# docs/cost-model.md, "What the profile's timers hold"):
#   1. scripts/layer_probe.py times one transformer block of each of the Zero Bubble paper's four
#      models (its Table 3 shapes, fp16, dropout 0.1, no FlashAttention) on this machine's GPU
#      with PyTorch, each kernel of the list one timed call (the queue kept full), and each pass
#      whole as Megatron-LM's Timer times it;
#   2. `stagecraft simulate --explain` predicts the same block on the matching device file
#      (scenarios/devices: A100-SXM-80GB, H100-SXM, H200, L40S, from the GPU's name);
#   3. a report: per model the measured and predicted F, I and W per layer, B/F and W/F in the
#      paper's split (its runtime defers only the weight GEMMs to W) beside the paper's A100
#      profile, and the kernels the model has most wrong.
# OUT defaults to build/out/layer-probe. Writes OUT/layer-probe.json (the probe's), OUT/layer-probe-compare.json and OUT/layer-probe.md;
# prints the report. A measurement, not a test: exits 0 whatever the numbers; prints a line
# starting with SKIPPED and exits 0 without PyTorch or a CUDA device.
# Usage: scripts/layer-probe.sh [--out DIR] [--json FILE] [--device-file NAME] [PROBE ARGS...]
#   --json FILE    compare a probe's JSON taken before (no GPU needed)
#   --device-file NAME  the device file to predict with (default: from the GPU's name)
#   PROBE ARGS     passed to layer_probe.py (--models, --reps, --dtype, --dropout)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="${STAGECRAFT:-$root/build/cli/stagecraft}"
out="$root/build/out/layer-probe" json="" device=""
probe_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="${2:?--out DIR}"; shift ;;
    --json) json="${2:?--json FILE}"; shift ;;
    --device-file) device="${2:?--device-file NAME}"; shift ;;
    *) probe_args+=("$1") ;;
  esac
  shift
done
[[ -x "$sc" ]] || { echo "layer-probe: missing $sc: run scripts/build.sh first" >&2; exit 1; }
mkdir -p "$out" || exit 1

if [[ -z "$json" ]]; then
  py=""
  for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
    [[ -n "$candidate" ]] && "$candidate" -c 'import torch' 2>/dev/null && { py="$candidate"; break; }
  done
  if [[ -z "$py" ]]; then
    echo "SKIPPED: the layer probe needs PyTorch (no python3 here imports torch)"
    exit 0
  fi
  json="$out/layer-probe.json"
  rm -f "$json"
  "$py" "$root/scripts/layer_probe.py" --out "$json" "${probe_args[@]}" | tee "$out/layer-probe.log"
  rc=${PIPESTATUS[0]}
  [[ $rc -eq 0 ]] || { echo "layer-probe: the probe failed (exit $rc)" >&2; exit "$rc"; }
  grep -q '^SKIPPED' "$out/layer-probe.log" && exit 0
fi
[[ -s "$json" ]] || { echo "layer-probe: $json: missing or empty" >&2; exit 1; }

python3 - "$sc" "$root" "$out" "$json" "$device" <<'PY'
import csv, json, os, subprocess, sys, tempfile
sc, root, out, path, device = sys.argv[1:]
try:
    probe = json.load(open(path))
    models = probe["models"]
except (OSError, ValueError, KeyError) as e:
    sys.exit(f"layer-probe: {path}: not a probe's JSON ({e})")
if not device:
    name = probe.get("device", "")
    for key, file in (("H200", "H200"), ("H100", "H100-SXM"), ("A100", "A100-SXM-80GB"), ("L40S", "L40S")):
        if key in name:
            device = file
            break
    else:
        sys.exit(f"layer-probe: no device file for '{name}': name one with --device-file")
paper = {}
with open(f"{root}/tests/data/zero_bubble_paper.csv") as fh:
    for r in csv.DictReader(l for l in fh if l.strip() and not l.startswith("#")):
        paper.setdefault(r["model"], (float(r["f_us"]), float(r["b_us"]), float(r["w_us"])))

def explain(m):
    """The block's kernels as the model times them: {(pass, name): us}."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        fh.write("name: layer-probe\n"
                 f"topology: {{device: {device}, nodes: 1, devices_per_node: 1, links: []}}\n"
                 f"model: {{transformer: {{layers: 1, hidden: {m['hidden']}, heads: {m['heads']}, seq: {m['seq']}, "
                 f"vocab: 50304, dropout: {'true' if probe['dropout'] > 0 else 'false'}}}}}\n"
                 f"pipeline: {{schedule: 1f1b, ranks: 1, microbatches: 1, microbatch_size: {m['microbatch']}, steps: 1}}\n"
                 f"training: {{optimizer: adam, lr: 0.0001, dtype: {probe['dtype']}}}\n")
    try:
        r = subprocess.run([sc, "simulate", fh.name, "--explain"], capture_output=True, text=True)
    finally:
        os.unlink(fh.name)
    if r.returncode != 0:
        sys.exit(f"layer-probe: simulate --explain failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    kernels, inside = {}, False
    for line in r.stdout.splitlines():
        if line.startswith("-- "):
            inside = line.strip() == "-- one transformer block"
            continue
        parts = line.split()
        if inside and len(parts) >= 6 and parts[0] in ("F", "I", "W"):
            kernels[(parts[0], parts[1])] = float(parts[2])
    if not kernels:
        sys.exit("layer-probe: simulate --explain printed no kernels of one transformer block")
    return kernels

ZB_IN_B = ("fc2.db", "fc.db", "ln2.dgamma", "proj.db", "qkv.db", "ln1.dgamma")
md = [f"# The kernel list against {probe['device']} (PyTorch {probe.get('torch', '?')}, {probe['dtype']}, "
      f"dropout {probe['dropout']}, median of {probe.get('reps', '?')}), predicted on {device}", "",
      "Per layer, ms. B/F and W/F in the Zero Bubble runtime's split (only the weight GEMMs in W); "
      "the paper's are its A100 profile (Appendix D), a whole stage.", "",
      "| model | F meas / pred | I meas / pred | W meas / pred | B/F meas / pred / paper | W/F meas / pred / paper "
      "| timed whole (Timer): F, I, W |", "| --- | --- | --- | --- | --- | --- | --- |"]
detail, compare = [], {"device": device, "probe_device": probe["device"], "models": []}
for m in models:
    pred = explain(m)
    meas = {(k["pass"], k["name"]): k["us"] for k in m["kernels"]}
    missing = sorted(set(pred) ^ set(meas))
    if missing:
        sys.exit(f"layer-probe: the probe's kernels and the list's differ: {missing[:6]}")
    def split(t):
        s = {q: sum(v for (p, n), v in t.items() if p == q) for q in "FIW"}
        moved = sum(v for (p, n), v in t.items() if n in ZB_IN_B)
        return s, {"F": s["F"], "B": s["I"] + moved, "W": s["W"] - moved}
    (ms, mz), (ps, pz) = split(meas), split(pred)
    f, b, w = paper.get(m["model"], (float("nan"),) * 3)
    t = m["timer_us"]
    md.append(f"| {m['model']} | {ms['F']/1e3:.3f} / {ps['F']/1e3:.3f} | {ms['I']/1e3:.3f} / {ps['I']/1e3:.3f} | "
              f"{ms['W']/1e3:.3f} / {ps['W']/1e3:.3f} | {mz['B']/mz['F']:.3f} / {pz['B']/pz['F']:.3f} / {b/f:.3f} | "
              f"{mz['W']/mz['F']:.3f} / {pz['W']/pz['F']:.3f} / {w/f:.3f} | {t['F']/1e3:.3f}, {t['I']/1e3:.3f}, {t['W']/1e3:.3f} |")
    rows = sorted(((pred[k] / meas[k] - 1, k) for k in meas if meas[k] > 0), key=lambda r: -abs(r[0]) * meas[r[1]])
    detail.append(f"- {m['model']}: the kernels whose error costs most time (predicted / measured µs): " + "; ".join(
        f"{p} {n} {pred[(p, n)]:.0f} / {meas[(p, n)]:.0f} ({e:+.0%})" for e, (p, n) in rows[:6]))
    compare["models"].append({"model": m["model"], "measured_us": ms, "predicted_us": ps, "measured_zb_us": mz,
                              "predicted_zb_us": pz, "paper_us": {"F": f, "B": b, "W": w},
                              "kernels": [{"pass": p, "name": n, "measured_us": meas[(p, n)], "predicted_us": pred[(p, n)]}
                                          for (p, n) in meas]})
md += [""] + detail
text = "\n".join(md) + "\n"
for name, content in (("layer-probe.md", text), ("layer-probe-compare.json", json.dumps(compare, indent=1) + "\n")):
    with open(os.path.join(out, name + ".tmp"), "w") as fh:
        fh.write(content)
    os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
print(text)
PY
