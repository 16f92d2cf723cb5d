#!/usr/bin/env bash
# `stagecraft-view --screenshot` under Xvfb: a predicted and a measured 1f1b trace of a small
# run overlaid; the PNG of the prediction over itself as a measured trace (a timeline that does
# not depend on the machine's load) decoded (stdlib only) and checked for size, content and the
# palette's F and B colours; then bad input: a trace that cannot be loaded (missing, a directory,
# truncated) or a --screenshot path that cannot be written is one error line, exit 1 and no
# picture; two schedules, missing or unusable fields render with a warning line; bad flags.
# Skips when the viewer was not built or xvfb-run is missing.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
view="$(dirname "$sc")/../viz/stagecraft-view"
if [[ ! -x "$view" ]]; then echo "SKIP: viewer not built"; exit 0; fi
if ! command -v xvfb-run >/dev/null; then echo "SKIP: xvfb-run not installed"; exit 0; fi
scenario="$root/scenarios/mlp-cpu.yaml"
small=(--set pipeline.schedule=1f1b --set model.mlp.hidden=256 --set pipeline.microbatch_size=16
       --set pipeline.steps=2)

"$sc" simulate "$scenario" "${small[@]}" --trace "$tmp/p.json" >/dev/null 2>"$tmp/err"
checkf "simulate writes the predicted trace" '[[ -s "$tmp/p.json" ]]' "$tmp/err"
timeout 300 "$root/scripts/mpirun.sh" 2 "$sc" execute "$scenario" "${small[@]}" --trace "$tmp/m.json" \
  --json "$tmp/run.json" >/dev/null 2>"$tmp/err"
checkf "execute writes the measured trace" '[[ -s "$tmp/m.json" ]]' "$tmp/err"

# shot NAME OUT.png TRACE...: runs the viewer under Xvfb; rc in $rc, stderr in $tmp/NAME.err
shot() {
  local name="$1" out="$2"; shift 2
  timeout 120 xvfb-run -a -s "-screen 0 1600x900x24" "$view" "$@" --screenshot "$out" --frames 5 \
    >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
}

# png_check PNG: prints "W H DISTINCT F_PIXELS B_PIXELS" (colours from viz/app/palette.h).
png_check() { png_colours "$1" 66,133,244 52,168,83; }

# ---- predicted over measured ------------------------------------------------------------------
# The executor's own trace overlays its prediction.
shot real "$tmp/real.png" "$tmp/p.json" "$tmp/m.json"
checkf "overlay of the executor's trace: exit 0, a picture, nothing on stderr" \
  '[[ $rc -eq 0 && -s "$tmp/real.png" && ! -s "$tmp/real.err" ]]' "$tmp/real.err"
# The run's replay (its own op times) opens beside it and the prediction, as a block of its own
# under theirs: more filled F than the overlay alone has, and nothing on stderr.
"$sc" replay "$tmp/run.json" --trace "$tmp/m.json" --trace-out "$tmp/r.json" >/dev/null 2>"$tmp/err"
checkf "replay writes its trace" '[[ -s "$tmp/r.json" ]]' "$tmp/err"
shot replay "$tmp/replay.png" "$tmp/p.json" "$tmp/m.json" "$tmp/r.json"
checkf "prediction, measurement and replay: exit 0, nothing on stderr" \
  '[[ $rc -eq 0 && -s "$tmp/replay.png" && ! -s "$tmp/replay.err" ]]' "$tmp/replay.err"
read -r _ _ _ f_real _ < <(png_check "$tmp/real.png" 2>/dev/null) || true
read -r _ _ _ f_replay _ < <(png_check "$tmp/replay.png" 2>/dev/null) || true
check "the replay's block adds its F ops (${f_real:-0} -> ${f_replay:-0} F-blue px)" \
  '[[ "${f_replay:-0}" -gt $(( ${f_real:-0} + 500 )) ]]'
# The pixel counts need a timeline that does not depend on how loaded the machine was during the
# run: the prediction itself as the measured trace (the same ops at the same times).
python3 - "$tmp/p.json" "$tmp/d.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["stagecraft"]["source"] = "measured"
json.dump(d, open(sys.argv[2], "w"))
PY
shot overlay "$tmp/out.png" "$tmp/p.json" "$tmp/d.json"
checkf "overlay: exit 0" '[[ $rc -eq 0 ]]' "$tmp/overlay.err"
check "overlay: PNG written, no temporary left" '[[ -s "$tmp/out.png" && ! -e "$tmp/out.png.tmp" ]]'
checkf "overlay: nothing on stderr" '[[ ! -s "$tmp/overlay.err" ]]' "$tmp/overlay.err"
read -r w h distinct f_px b_px < <(png_check "$tmp/out.png" 2>"$tmp/png.err") || true
checkf "PNG decodes" '[[ -n "${w:-}" ]]' "$tmp/png.err"
check "PNG is 1600x900 (got ${w:-?}x${h:-?})" '[[ "${w:-}" == 1600 && "${h:-}" == 900 ]]'
echo "overlay: ${distinct:-0} colours, ${f_px:-0} F-blue px, ${b_px:-0} B-green px"
check "PNG not blank (${distinct:-0} colours)" '[[ "${distinct:-0}" -ge 50 ]]'
check "F blue present (${f_px:-0} px)" '[[ "${f_px:-0}" -ge 2000 ]]'
check "B green present (${b_px:-0} px)" '[[ "${b_px:-0}" -ge 2000 ]]'

# ---- a trace that cannot be loaded: one error line, exit 1, no picture (no window needed) -------
# shot_fails NAME EXPECTED TRACE...: the viewer must refuse with EXPECTED on one stderr line.
shot_fails() {
  local name="$1" expect="$2"; shift 2
  shot "$name" "$tmp/$name.png" "$@"
  checkf "$name: exit 1, one error line, no picture" \
    '[[ $rc -eq 1 && $(wc -l <"$tmp/$name.err") -eq 1 && ! -e "$tmp/$name.png" && ! -s "$tmp/$name.out" ]]' "$tmp/$name.err"
  checkf "$name: says '$expect'" 'grep -qF -- "stagecraft-view: error: $expect" "$tmp/$name.err"' "$tmp/$name.err"
}
shot_fails missing "$tmp/does-not-exist.json: cannot read: no such file or directory" "$tmp/p.json" "$tmp/does-not-exist.json"
shot_fails directory "$tmp: cannot read: is a directory" "$tmp"
head -c 2000 "$tmp/p.json" >"$tmp/truncated.json"
shot_fails truncated "$tmp/truncated.json: not valid JSON: " "$tmp/truncated.json" "$tmp/m.json"

# ---- the --screenshot path is checked before any trace is read --------------------------------
mkdir "$tmp/shots"
shot outdir "$tmp/shots" "$tmp/does-not-exist.json"
checkf "screenshot into a directory: refused first, one line" \
  '[[ $rc -eq 1 && $(wc -l <"$tmp/outdir.err") -eq 1 ]] && grep -qF -- "stagecraft-view: error: --screenshot $tmp/shots: cannot write: is a directory" "$tmp/outdir.err"' \
  "$tmp/outdir.err"
shot nofolder "$tmp/none/x.png" "$tmp/p.json"
checkf "screenshot into a missing folder: refused, no picture" \
  '[[ $rc -eq 1 && ! -e "$tmp/none" ]] && grep -qF -- "--screenshot $tmp/none/x.png: cannot write: folder $tmp/none: no such file or directory" "$tmp/nofolder.err"' \
  "$tmp/nofolder.err"
# Through a symbolic link: its target gets the picture, the link stays a link.
ln -s "$tmp/shots/target.png" "$tmp/link.png"
shot link "$tmp/link.png" "$tmp/p.json"
checkf "screenshot through a link: exit 0, the link kept, its target a PNG" \
  '[[ $rc -eq 0 && -L "$tmp/link.png" && -s "$tmp/shots/target.png" ]] && [[ "$(head -c 4 "$tmp/shots/target.png" | tail -c 3)" == PNG ]]' \
  "$tmp/link.err"

# ---- problems that still render: a warning line, exit 0 ---------------------------------------
"$sc" simulate "$scenario" "${small[@]}" --set pipeline.schedule=gpipe --trace "$tmp/g.json" >/dev/null 2>&1
shot schedules "$tmp/schedules.png" "$tmp/g.json" "$tmp/d.json"
check "two schedules: exit 0 and a picture" '[[ $rc -eq 0 && -s "$tmp/schedules.png" ]]'
checkf "two schedules: overlay refused on stderr" 'grep -q "stagecraft-view: warning: .*cannot overlay" "$tmp/schedules.err" && grep -q "gpipe" "$tmp/schedules.err"' "$tmp/schedules.err"
read -r _ _ _ f_px b_px < <(png_check "$tmp/schedules.png" 2>/dev/null) || true
check "two schedules: still drawn side by side" '[[ "${f_px:-0}" -ge 2000 && "${b_px:-0}" -ge 2000 ]]'

# Unknown fields are ignored; an op missing its start, or with a negative duration, is skipped,
# counted and the first named with its position in traceEvents.
python3 - "$tmp/m.json" "$tmp/fields.json" "$tmp/negative.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["stagecraft"]["future_field"] = {"x": 1}
ops = [e for e in d["traceEvents"] if e.get("ph") == "X"]
for e in ops:
    e["future_arg"] = 7
ops[2]["dur"] = -5
json.dump(d, open(sys.argv[3], "w"))
ops[2]["dur"] = 1
del ops[3]["ts"]
json.dump(d, open(sys.argv[2], "w"))
PY
read -r missing_at negative_at < <(python3 -c 'import json,sys; ev=json.load(open(sys.argv[1]))["traceEvents"]; x=[i for i,e in enumerate(ev) if e.get("ph")=="X"]; print(x[3], x[2])' "$tmp/m.json")
shot fields "$tmp/fields.png" "$tmp/p.json" "$tmp/fields.json"
check "fields: exit 0 and a picture" '[[ $rc -eq 0 && -s "$tmp/fields.png" ]]'
checkf "fields: one skipped event, named" \
  'grep -qxF "stagecraft-view: warning: $tmp/fields.json: 1 event skipped: event $missing_at: \"ts\" is missing" "$tmp/fields.err"' "$tmp/fields.err"
shot negative "$tmp/negative.png" "$tmp/negative.json"
check "negative duration: exit 0 and a picture" '[[ $rc -eq 0 && -s "$tmp/negative.png" ]]'
checkf "negative duration: named as what it is" \
  'grep -qxF "stagecraft-view: warning: $tmp/negative.json: 1 event skipped: event $negative_at: \"dur\" is negative (-5)" "$tmp/negative.err"' \
  "$tmp/negative.err"

# ---- bad flags: one line, exit 2, no window needed ----------------------------------------------
"$view" "$tmp/p.json" --frames 2>"$tmp/flag.err"; rc=$?
check "bad flag: exit 2, one line" '[[ $rc -eq 2 && $(wc -l <"$tmp/flag.err") -eq 1 ]] && grep -q -- "--frames" "$tmp/flag.err"'
"$view" --bogus 2>"$tmp/flag.err"; rc=$?
check "unknown flag: exit 2" '[[ $rc -eq 2 ]] && grep -q "unknown flag --bogus" "$tmp/flag.err"'

# ---- no display: one line naming the cause, exit 1 ----------------------------------------------
env -u DISPLAY -u WAYLAND_DISPLAY "$view" "$tmp/p.json" --screenshot "$tmp/nodisplay.png" 2>"$tmp/nodisplay.err"; rc=$?
checkf "no display: exit 1, one line, no picture" \
  '[[ $rc -eq 1 && $(wc -l <"$tmp/nodisplay.err") -eq 1 && ! -e "$tmp/nodisplay.png" ]] && grep -q "cannot open a window" "$tmp/nodisplay.err"' \
  "$tmp/nodisplay.err"

exit $fail
