#!/usr/bin/env bash
# fuzz.sh [SECONDS]: builds the input parsers' libFuzzer harnesses (clang, ASan + UBSan) into
# build-fuzz/ and runs each for SECONDS (default 60), one after the other, starting from its
# seeds in tests/fuzz/corpus/<name>/ (only read). New inputs go to build-fuzz/corpus/<name>/,
# crashes, leaks and timeouts to build-fuzz/artifacts/<name>/, the fuzzer's output to
# build-fuzz/logs/<name>.log. Prints one line per harness with its executions; exits non-zero
# when any harness found something.
#   FUZZ_RUNS=N     also stop each harness after N executions
#   FUZZ_ONLY="csv trace"   run only these harnesses
#   FUZZ_NICE=N     niceness of the fuzzer processes (default 10)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=${1:-60}
build="$root/build-fuzz"
all="scenario topology profile csv schedule_json trace metrics plan"
[[ $# -le 1 && "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2; }
for name in ${FUZZ_ONLY:-}; do
  [[ " $all " == *" $name "* ]] || { echo "fuzz.sh: FUZZ_ONLY: no harness '$name' (known: $all)" >&2; exit 2; }
done
command -v clang++-14 >/dev/null || { echo "fuzz.sh: clang++-14 is missing: libFuzzer needs clang (apt-get install clang-14)" >&2; exit 1; }

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DSTAGECRAFT_FUZZ=ON -DSTAGECRAFT_CUDA=OFF -DSTAGECRAFT_VIEWER=OFF >/dev/null
cmake --build "$build" -j"$(nproc)"

# Longest input per harness: room for the largest seed and then some, small enough to stay fast.
declare -A max_len=([scenario]=4096 [topology]=2048 [profile]=4096 [csv]=4096 [schedule_json]=16384
                    [trace]=16384 [metrics]=8192 [plan]=4096)
names=${FUZZ_ONLY:-$all}
failed=0
printf '%-14s %12s %8s  %s\n' harness executions seconds result
for name in $names; do
  corpus="$build/corpus/$name"
  artifacts="$build/artifacts/$name"
  log="$build/logs/$name.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  args=(-max_total_time="$seconds" -max_len="${max_len[$name]}" -timeout=10 -rss_limit_mb=2048
        -artifact_prefix="$artifacts/" -print_final_stats=1)
  [ -f "$root/tests/fuzz/dict/$name.dict" ] && args+=(-dict="$root/tests/fuzz/dict/$name.dict")
  [ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$FUZZ_RUNS")
  start=$(date +%s)
  rc=0
  # From the source root, where a scenario's file names given through --set resolve.
  (cd "$root" && nice -n "${FUZZ_NICE:-10}" "$build/tests/fuzz/${name}_fuzz" "${args[@]}" \
     "$corpus" "$root/tests/fuzz/corpus/$name" </dev/null >"$log" 2>&1) || rc=$?
  elapsed=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    result=ok
  else
    result="FAILED (exit $rc): $(grep -m1 -E '^==[0-9]+==ERROR|runtime error|^SUMMARY' "$log" || echo "see $log")"
    failed=1
  fi
  printf '%-14s %12s %8s  %s\n' "$name" "${runs:-?}" "$elapsed" "$result"
done
if [ "$failed" -ne 0 ]; then
  echo "inputs that failed are in $build/artifacts/<harness>/; logs in $build/logs/"
fi
exit "$failed"
