#!/usr/bin/env bash
# The design contract's arrows (DESIGN.md §1, §9) against the code: each library and front end
# (cli, python) includes only the libraries below it, exec includes nothing of the simulator (DESIGN.md §10),
# and no public header of base/, schedules/, scenario/ or sim/ includes CUDA, NCCL, MPI, yaml-cpp or ImGui.
# Prints every include that breaks a rule and exits 1 when there is one.
set -uo pipefail
root="$1"
cd "$root" || exit 2
fail=0

# allowed LIBRARY: the stagecraft libraries its files may include (besides itself).
declare -A allowed=(
  [base]=""
  [schedules]="base"
  [scenario]="base schedules"
  [sim]="base schedules scenario"
  [kernels]="base"
  [exec]="base schedules scenario kernels"
  [harness]="base schedules scenario kernels sim exec"
  [viz]="base schedules"
  # The front ends. The command line still reaches below the harness (the executor's start-up and
  # transports for execute and profile, the scenario, the simulator's costs); these are the arrows
  # it has, and no more may be added.
  [cli]="base schedules scenario sim exec harness"
  [python]="base schedules scenario sim harness"
)
for lib in "${!allowed[@]}"; do
  [[ -d "$lib" ]] || continue
  while IFS= read -r line; do
    file="${line%%:*}"
    target="$(sed -E 's/.*#include "stagecraft\/([a-z_]+)\/([^"]+)".*/\1 \2/' <<<"${line#*:}")"
    used="${target%% *}"; header="${target#* }"
    [[ "$used" == "$lib" ]] && continue
    ok=0
    for a in ${allowed[$lib]}; do [[ "$used" == "$a" ]] && ok=1; done
    if [[ $ok -eq 0 ]]; then
      echo "FAIL: $file includes stagecraft/$used/$header: $lib may include only: ${allowed[$lib]:-nothing of stagecraft}"
      fail=1
    fi
  done < <(grep -rn --include='*.h' --include='*.cuh' --include='*.cpp' --include='*.cu' '#include "stagecraft/' "$lib" | sed 's/:[0-9]*:/:/')
done

# Public headers of the lower libraries stay free of the heavy third-party headers.
while IFS= read -r line; do
  echo "FAIL: ${line%%:*} includes ${line#*:}: a public header of base/, schedules/, scenario/ or sim/ may not"
  fail=1
done < <(grep -rn -E '#include <(mpi|cuda|cublas|nccl|yaml-cpp|imgui)' base/include schedules/include scenario/include sim/include |
         sed 's/:[0-9]*:/:/')

[[ $fail -eq 0 ]] && echo "include arrows: every library includes only what the design contract allows"
exit $fail
