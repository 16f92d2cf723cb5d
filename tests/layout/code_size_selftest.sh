#!/usr/bin/env bash
# code_size.py against hand-made trees: a function of 81 lines and a file of 451 are each found
# (and named), one of 80 lines and a file of 450 pass; braces in strings, comments, macros and
# initialisers do not open functions.
set -uo pipefail
checker="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/code_size.py"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fail=0
# body LINES: a function whose braces span LINES lines (the line of { to the line of }).
body() {
  echo "int F$1(int x) {"
  for ((i = 0; i < $1 - 3; ++i)); do echo "  x += $i;  // a { in a comment"; done
  echo "  return x;"
  echo "}"
}
expect() {  # expect RC WHAT PATTERN: the checker over $tmp/src exits RC and prints PATTERN
  out="$(python3 "$checker" "$tmp/src")"; rc=$?
  if [[ $rc -ne $1 ]] || ! grep -q -- "$3" <<<"$out"; then
    echo "FAIL: $2: exit $rc, output:"; echo "$out"; fail=1
  fi
}
mkdir -p "$tmp/src/base/src"
body 80 > "$tmp/src/base/src/ok.cpp"
cat >> "$tmp/src/base/src/ok.cpp" <<'CPP'
#define SC_CHECK(c) \
  do {              \
    if (!(c)) {     \
    }               \
  } while (0)
const char* kText = "}{ not a brace";
constexpr int kTable[] = {1, 2, 3};
struct S {
  int Get() const { return v; }
  int v = 0;
};
CPP
expect 0 "an 80-line function passes" "0 over the limits"
body 81 > "$tmp/src/base/src/long.cpp"
expect 1 "an 81-line function is found" "long.cpp:1: function F81 is 81 lines"
rm "$tmp/src/base/src/long.cpp"
for ((i = 0; i < 451; ++i)); do echo "// line $i"; done > "$tmp/src/base/src/big.cpp"
expect 1 "a 451-line file is found" "big.cpp: 451 lines"
head -n 450 "$tmp/src/base/src/big.cpp" > "$tmp/src/base/src/big2.cpp"; rm "$tmp/src/base/src/big.cpp"
expect 0 "a 450-line file passes" "0 over the limits"
[[ $fail -eq 0 ]] && echo "code_size.py: finds the long function and the large file, passes the limits themselves"
exit $fail
