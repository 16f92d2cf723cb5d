#!/usr/bin/env bash
# The Zero Bubble paper's own middle stage timed with its own timers (tools/stagecraft_tools/
# zb_fork_layer.py, run by its entry point scripts/zb_fork_layer.py; docs/cost-model.md, "The
# paper's own stage on a GPU"). Its two inputs, read and never kept in this repository, are
# exported once into build/zb-fork/ (ignored by git: carry it to a GPU machine with the build, or
# gpu-check.sh skips the step there):
#   scripts/zb-fork-layer.sh --prepare ZB_GIT APEX_GIT
#       ZB_GIT: a clone (or bare mirror) of github.com/sail-sg/zero-bubble-pipeline-parallelism
#       holding commit ed85b11c (the paper's code release): its megatron/ goes to build/zb-fork/fork;
#       APEX_GIT: one of github.com/NVIDIA/apex: csrc/megatron/ and csrc/type_shim.h at its HEAD go
#       to build/zb-fork/apex (the kernels the fork calls; their code has not changed since 2023
#       but for API clean-ups), the commit in build/zb-fork/apex/COMMIT.
#   scripts/zb-fork-layer.sh [--check | --ops MODEL | --rehearse] [zb_fork_layer.py's options]
#       --check: on the CPU, the stage's F / B / W against plain autograd; --ops: the aten
#       operators of one layer's F, B and W; else on the GPU, the four models' F, B and W per
#       layer, with TorchScript's fuser on and off (with --out FILE, then the comparison below).
#   scripts/zb-fork-layer.sh --compare FILE [--device-file NAME]
#       a GPU run's JSON beside the roofline list's prediction of one layer of the same shapes on
#       the GPU's device file (scenarios/devices, from the GPU's name unless named): per model F,
#       B and W per layer, measured and predicted, in the Zero Bubble runtime's split (its W the
#       weight GEMMs alone), and B/F and W/F beside the paper's A100 profile. Writes FILE's name
#       with .compare.json for .json; needs neither the trees nor PyTorch.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${ZB_FORK_DIR:-$root/build/zb-fork}"   # ZB_FORK_DIR=DIR keeps the two trees elsewhere
ZB_RELEASE=ed85b11c

if [[ "${1:-}" == "--compare" ]]; then
  shift
  exec "$root/scripts/tool.sh" zb_fork_compare "$@"
fi
if [[ "${1:-}" == "--prepare" ]]; then
  zb="${2:?usage: scripts/zb-fork-layer.sh --prepare ZB_GIT APEX_GIT}"
  apex="${3:?usage: scripts/zb-fork-layer.sh --prepare ZB_GIT APEX_GIT}"
  git -C "$zb" cat-file -e "$ZB_RELEASE^{commit}" 2>/dev/null ||
    { echo "zb-fork-layer.sh: $zb: no commit $ZB_RELEASE (the Zero Bubble code release)" >&2; exit 2; }
  git -C "$apex" cat-file -e HEAD:csrc/megatron/scaled_upper_triang_masked_softmax_cuda.cu 2>/dev/null ||
    { echo "zb-fork-layer.sh: $apex: no csrc/megatron/scaled_upper_triang_masked_softmax_cuda.cu at HEAD (an Apex clone)" >&2; exit 2; }
  mkdir -p "$(dirname "$dir")"
  tmp="$(mktemp -d "$dir.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/fork" "$tmp/apex"
  git -C "$zb" archive "$ZB_RELEASE" megatron | tar -x -C "$tmp/fork"
  git -C "$apex" archive HEAD csrc/megatron csrc/type_shim.h | tar -x -C "$tmp/apex"
  git -C "$apex" rev-parse HEAD >"$tmp/apex/COMMIT"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
  echo "zb-fork-layer.sh: $dir: the release's megatron/ ($ZB_RELEASE) and Apex's kernels ($(cut -c1-8 "$dir/apex/COMMIT"))"
  exit 0
fi
[[ -d "$dir/fork/megatron" ]] ||
  { echo "zb-fork-layer.sh: no $dir (run scripts/zb-fork-layer.sh --prepare ZB_GIT APEX_GIT first)" >&2; exit 2; }
# --check needs torch alone; Debian's python3-torch is /usr/bin/python3's.
py=python3
python3 -c "import torch" 2>/dev/null || py=/usr/bin/python3
"$py" "$root/scripts/zb_fork_layer.py" --fork "$dir/fork" --apex "$dir/apex" --build-dir "$dir-ext" "$@"
# A GPU run that wrote its JSON: the list's prediction beside it. The run's outcome is the
# measurement's: a comparison that fails says so and leaves the exit status alone.
out="" timed=1
for ((i = 1; i <= $#; ++i)); do
  case "${!i}" in
    --out) j=$((i + 1)); out="${!j:-}" ;;
    --out=*) out="${!i#--out=}" ;;
    --check | --ops | --ops=* | --rehearse) timed=0 ;;
  esac
done
if [[ $timed -eq 1 && -n "$out" && -s "$out" ]]; then
  "$root/scripts/tool.sh" zb_fork_compare "$out" || echo "zb-fork-layer.sh: the list's prediction beside $out failed (the run's JSON is kept)" >&2
fi
