# Shared by the CLI test scripts (sourced, not a test): `check` records a failed condition,
# `checkf` also shows a captured stderr when it fails (both conditions see, in $?, the status
# of the command run before them),
# `expect_error` runs the binary on bad input (`expect_command_error` any command, optionally
# with the exit code it must give) and checks the contract for it: non-zero exit,
# exactly one line on stderr containing the expected text, nothing on stdout.
# Sourced first thing: the script's arguments are the binary and the source root; `tmp` is a
# folder of its own, removed at exit.
sc="$1"; root="${2:-}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; fi; }
# checkf NAME COND FILE: check, and show FILE (a captured stderr) when it fails.
checkf() {
  local last=$? before=$fail
  fail=0
  # The condition sees the status of the command before checkf in $?, as check's does.
  (exit "$last")
  check "$1" "$2"
  [[ $fail -eq 0 ]] || sed 's/^/  | /' "$3"
  [[ $before -eq 0 ]] || fail=1
}

# expect_error NAME EXPECTED_TEXT ARGS...   (runs "$sc" ARGS...; uses "$tmp" for stderr)
expect_error() {
  local name="$1" expect="$2"; shift 2
  expect_command_error "$name" "$expect" "" "$sc" "$@"
}
# expect_command_error NAME EXPECTED_TEXT EXIT COMMAND...: the same contract for any command;
# EXIT, when not empty, is the exit code it must give.
expect_command_error() {
  local name="$1" expect="$2" want="$3"; shift 3
  local so se rc before=$fail
  fail=0
  so="$("$@" 2>"$tmp/err")"; rc=$?
  se="$(cat "$tmp/err")"
  check "$name: non-zero exit" '[[ $rc -ne 0 ]]'
  [[ -z "$want" ]] || check "$name: exit $want (got $rc)" '[[ $rc -eq $want ]]'
  check "$name: one stderr line" '[[ $(wc -l <"$tmp/err") -eq 1 ]]'
  check "$name: empty stdout" '[[ -z "$so" ]]'
  check "$name: message has '$expect'" '[[ "$se" == *"$expect"* ]]'
  [[ $fail -eq 0 ]] || echo "  stderr was: $se"
  [[ $before -eq 0 ]] || fail=1
}

# broken_traces TRACE PREFIX SUFFIX: TRACE broken five ways, for the readers that must refuse it:
# its fourth compute event's "dur" made -5, "abc" and 1e400 (PREFIX{neg,abc,big}SUFFIX), that
# event dropped (PREFIXdropSUFFIX), and no events at all (PREFIXemptySUFFIX). Prints the index of
# that event in traceEvents, which the readers' messages name.
broken_traces() {
  python3 - "$@" <<'PY'
import json, re, sys
trace, prefix, suffix = sys.argv[1:4]
lines = open(trace).read().split("\n")
ops = [i for i, l in enumerate(lines) if '"ph":"X"' in l and '"tid":0' in l]
def write(name, edit):
    l = list(lines)
    edit(l)
    open(f"{prefix}{name}{suffix}", "w").write("\n".join(l))
def dur(value):
    return lambda l: l.__setitem__(ops[3], re.sub(r'"dur":[0-9.]+', '"dur":' + value, l[ops[3]]))
write("neg", dur("-5"))
write("abc", dur('"abc"'))
write("big", dur("1e400"))
write("drop", lambda l: l.__delitem__(ops[3]))
t = json.loads("\n".join(lines))
t["traceEvents"] = []
json.dump(t, open(f"{prefix}empty{suffix}", "w"))
events = json.loads("\n".join(lines))["traceEvents"]
print([i for i, e in enumerate(events) if e.get("ph") == "X" and e.get("tid") == 0][3])
PY
}

# png_colours PNG R,G,B...: decodes PNG (stdlib only) and prints "W H DISTINCT N..." with, for each
# colour given, the pixels within 6 of it in every channel.
png_colours() {
  python3 - "$@" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    pos += 12 + n
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), f"unexpected PNG format {depth}/{ctype}"
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
raw = zlib.decompress(idat)
stride = w * bpp
rows, prev, i = [], bytearray(stride), 0
for _ in range(h):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
    i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line))
    prev = line
colours = {}
for line in rows:
    for x in range(0, stride, bpp):
        px = line[x:x + 3]
        colours[px] = colours.get(px, 0) + 1
def near(rgb, tol=6):
    return sum(n for px, n in colours.items() if all(abs(px[k] - rgb[k]) <= tol for k in range(3)))
print(w, h, len(colours), *(near(tuple(int(v) for v in c.split(","))) for c in sys.argv[2:]))
PY
}
