#!/usr/bin/env bash
# The cuda backend's checks and benchmarks on a machine with a GPU, in one go:
#   1. ctest -L gpu (launchers, the cuda device's GEMMs per dtype, every schedule on the cuda
#      backend over host-staged MPI and, with a GPU per rank, NCCL; execute/profile end to end
#      and the fault case);
#   2. build/tests/bench/cuda_bench: one layer's F, I, W against bare cuBLAS in the scenario's
#      shape (of_cublas, target >= 0.9) and the runtime's cost per op (us_per_op, target <= 10);
#   3. build/tests/bench/nccl_p2p_bench on 2 ranks with a GPU each: sendrecv bandwidth of raw
#      NCCL (measured as nccl-tests does), of the NcclTransport and of the host-staged transport;
#   4. gpt-gpu's model and batch on one GPU beside PyTorch (tools/stagecraft_tools/gpu_peer_bench.py):
#      samples/s of stagecraft (cuda backend, 1 rank, 1F1B), of PyTorch eager and of torch.compile
#      (the python3 on PATH that imports torch, or $TORCH_PYTHON), the median of PEER_REPEATS runs
#      (default 3) after 3 untimed warm-up steps, the ratios, and the verdict against the target
#      stagecraft >= torch.compile; torch.compile absent or failing is a row saying why.
# scripts/gpu-check.sh runs 1 to 3 and the scenarios too, and writes one report of them all; the
# comparison with PyTorch (4) is here alone.
# Usage: scripts/bench-gpu.sh     (builds first if needed, then asks `stagecraft devices`;
#                                  without a usable GPU it says why and exits 0)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STAGECRAFT_BUILD:-$root/build}"   # STAGECRAFT_BUILD=DIR measures another build
(($# == 0)) || { echo "usage: scripts/bench-gpu.sh" >&2; exit 2; }
sc="$build/cli/stagecraft"
[[ -x "$sc" && -x "$build/tests/bench/cuda_bench" ]] || "$root/scripts/build.sh" >/dev/null
if ! "$sc" devices --quiet; then
  echo "bench-gpu: nothing to measure: $("$sc" devices | sed -n 's/^verdict: //p')"
  exit 0
fi
"$sc" devices
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== 1/4 ctest -L gpu"
(cd "$build" && ctest -L gpu --output-on-failure --timeout 900) || echo "bench-gpu: some gpu tests FAILED (above)"
echo "== 2/4 cuda_bench"
"$build/tests/bench/cuda_bench"
echo "== 3/4 nccl_p2p_bench (2 ranks)"
if [[ -x "$build/tests/bench/nccl_p2p_bench" ]]; then
  "$root/scripts/mpirun.sh" 2 "$build/tests/bench/nccl_p2p_bench"
else
  echo "this build has no NCCL: no p2p benchmark"
fi
echo "== 4/4 gpt-gpu beside PyTorch eager and torch.compile (one rank, one GPU)"
STAGECRAFT="$sc" STAGECRAFT_BUILD="$build" "$root/scripts/tool.sh" gpu_peer_bench "${PEER_REPEATS:-3}" ||
  echo "bench-gpu: the comparison with PyTorch FAILED (above)"
