#!/usr/bin/env bash
# Regenerates the README's picture of the viewer, docs/viewer.png, from the default scenario's
# traces: predicted and measured 1f1b overlaid, with predicted gpipe and zb-h1 side by side on
# the same time axis, zoomed to the first two steps. Run ./scripts/run.sh first (it writes
# build/out/predicted.trace.<schedule>.json and measured.trace.<schedule>.json), then:
#   scripts/screenshot.sh [OUT.png]        (default docs/viewer.png; needs xvfb-run or a display)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out_png="${1:-$root/docs/viewer.png}"
view="$root/build/viz/stagecraft-view"
traces="$root/build/out"
[[ -x "$view" ]] || { echo "screenshot.sh: $view is missing: build with ./scripts/build.sh (needs libglfw3-dev, libimgui-dev)" >&2; exit 1; }
files=()
for f in predicted.trace.1f1b.json measured.trace.1f1b.json predicted.trace.gpipe.json predicted.trace.zb-h1.json; do
  [[ -s "$traces/$f" ]] || { echo "screenshot.sh: $traces/$f is missing: run ./scripts/run.sh first" >&2; exit 1; }
  files+=("$traces/$f")
done
# The first two steps (plus a little) of the slowest of them, from the summaries in the traces.
range="$(python3 - "${files[@]}" <<'PY'
import json, sys
step_ms = max(json.load(open(p)).get("stagecraft", {}).get("summary", {}).get("step_time_ms", 0) for p in sys.argv[1:])
print(f"0:{2.15 * step_ms:.3f}" if step_ms > 0 else "")
PY
)"
args=("${files[@]}" --screenshot "$out_png" --frames 5 --width 1600 --height 900)
[[ -n "$range" ]] && args+=(--range "$range")
mkdir -p "$(dirname "$out_png")"
if command -v xvfb-run >/dev/null; then
  xvfb-run -a -s "-screen 0 1600x900x24" "$view" "${args[@]}"
else
  "$view" "${args[@]}"
fi
echo "wrote $out_png"
