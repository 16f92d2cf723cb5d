# Shared by the GPU probe scripts (layer-probe.sh, moe-probe.sh; sourced, not run): their common
# arguments, and the probe run under the first python3 that imports torch.
#
# probe_parse NAME ARGS...: sets root, sc (stagecraft), out (default build/out/NAME), json,
#   device, probe_args (the rest) and sets (as --set pairs) from --out, --json, --device-file and
#   --set; exits 1 naming stagecraft when the build is missing.
probe_parse() {
  local name="$1"; shift
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  sc="${STAGECRAFT:-$root/build/cli/stagecraft}"
  out="$root/build/out/$name" json="" device=""
  probe_args=() sets=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --out) out="${2:?--out DIR}"; shift ;;
      --json) json="${2:?--json FILE}"; shift ;;
      --device-file) device="${2:?--device-file NAME}"; shift ;;
      --set) sets+=(--set "${2:?--set KEY=VALUE}"); shift ;;
      *) probe_args+=("$1") ;;
    esac
    shift
  done
  [[ -x "$sc" ]] || { echo "$name: missing $sc: run scripts/build.sh first" >&2; exit 1; }
  mkdir -p "$out" || exit 1
}

# probe_run NAME MODULE WHAT: unless --json named a probe, runs stagecraft_tools.MODULE with
# --out $out/NAME.json and the probe's arguments under the first python3 that imports torch,
# its output also in $out/NAME.log, and sets json to its JSON; exits 0 after a SKIPPED line
# (without PyTorch, WHAT names what needs it; or the probe's own), non-zero when the probe fails;
# then checks that the JSON is there.
probe_run() {
  local name="$1" module="$2" what="$3" py="" candidate rc
  if [[ -z "$json" ]]; then
    for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
      [[ -n "$candidate" ]] && "$candidate" -c 'import torch' 2>/dev/null && { py="$candidate"; break; }
    done
    if [[ -z "$py" ]]; then
      echo "SKIPPED: $what needs PyTorch (no python3 here imports torch)"
      exit 0
    fi
    json="$out/$name.json"
    rm -f "$json"
    PYTHONPATH="$root/tools${PYTHONPATH:+:$PYTHONPATH}" "$py" -m "stagecraft_tools.$module" --out "$json" \
      "${probe_args[@]}" | tee "$out/$name.log"
    rc=${PIPESTATUS[0]}
    [[ $rc -eq 0 ]] || { echo "$name: the probe failed (exit $rc)" >&2; exit "$rc"; }
    grep -q '^SKIPPED' "$out/$name.log" && exit 0
  fi
  [[ -s "$json" ]] || { echo "$name: $json: missing or empty" >&2; exit 1; }
}
