#!/usr/bin/env bash
# doc_paths.py against a hand-made tree: a page naming a path that is not there is found (page,
# line and path), in any of the forms the checker reads (a full path, a library's short header
# path, an include path, a `{a,b}` alternative, a relative link); a page naming only paths that
# are there, or paths the checker leaves alone (URLs, ../shared, build/, globs, placeholders),
# passes.
set -uo pipefail
checker="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/doc_paths.py"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {  # expect RC WHAT PATTERN: the checker over $tmp/src exits RC and prints PATTERN
  out="$(python3 "$checker" "$tmp/src")"; rc=$?
  if [[ $rc -ne $1 ]] || ! grep -qF -- "$3" <<<"$out"; then
    echo "FAIL: $2: exit $rc, output:"; echo "$out"; fail=1
  fi
}
mkdir -p "$tmp/src/sim/include/stagecraft/sim" "$tmp/src/sim/src" "$tmp/src/scripts" "$tmp/src/docs/results"
touch "$tmp/src/sim/include/stagecraft/sim/costs.h" "$tmp/src/sim/src/engine.cpp" "$tmp/src/scripts/test.sh"
touch "$tmp/src/docs/results/run.md"
cat >"$tmp/src/README.md" <<'MD'
# A project
Run `scripts/test.sh`; the engine is `sim/src/engine.cpp`, its costs `sim/costs.h` (in full
`sim/include/stagecraft/sim/costs.h`, included as "stagecraft/sim/costs.h"), both in `sim/`.
`sim/include/stagecraft/sim/{costs,costs}.h`; see [the results](docs/results/run.md#top).
Not checked: https://example.org/sim/gone.h, ../shared/DESIGN.md, [it](../shared/STYLE.md),
`build/cli/stagecraft`, `sim/src/*.cpp`, `sim/src/<name>_costs.cpp`, `scripts/NAME.sh`,
github.com/other/sim/gone.h, and paths of folders that are not here: `other/gone.h`.
MD
expect 0 "existing paths pass" "0 paths not found"

printf '# Page\n\nThe limits are in `sim/limits.h`.\n' >"$tmp/src/docs/page.md"
expect 1 "a missing short header path is found" "docs/page.md:3: sim/limits.h: no such path"
printf '# Page\n\nThe limits are in `sim/include/stagecraft/sim/limits.h`.\n' >"$tmp/src/docs/page.md"
expect 1 "a missing full path is found" "docs/page.md:3: sim/include/stagecraft/sim/limits.h: no such path"
printf '# Page\n\n#include "stagecraft/sim/limits.h"\n' >"$tmp/src/docs/page.md"
expect 1 "a missing include path is found" "docs/page.md:3: stagecraft/sim/limits.h: no such path"
printf '# Page\n\nBoth `scripts/{test,gone}.sh`.\n' >"$tmp/src/docs/page.md"
expect 1 "a missing alternative is found" "docs/page.md:3: scripts/gone.sh: no such path"
printf '# Page\n\nSee [the run](results/gone.md).\n' >"$tmp/src/docs/page.md"
expect 1 "a broken relative link is found" "docs/page.md:3: results/gone.md: no such path"

printf '# Page\n\nSee [the run](results/run.md) and `sim/costs.h`.\n' >"$tmp/src/docs/page.md"
expect 0 "the page once fixed passes" "0 paths not found"
[[ $fail -eq 0 ]] && echo "doc_paths.py: finds each missing path with its page and line, passes the paths that exist"
exit $fail
