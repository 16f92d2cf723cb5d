#!/usr/bin/env python3
"""Holds the production sources to the project's size limits: no file over MAX_FILE lines and no
function (or lambda-bearing function body) over MAX_FUNCTION lines.

Usage: code_size.py ROOT [--max-file N] [--max-function N] [--report]
Production sources are the C++ and CUDA files under the library folders (tests/, build/ and
third-party paths are not production). A function's length counts the lines from the one holding
its opening brace to the one holding its closing brace. Functions are found by brace matching
with comments, strings and character literals blanked out: a brace opens a function body when it
is not inside another function, the statement before it ends with a parameter list (`)`, maybe
followed by qualifiers, a trailing return type or a constructor's initialiser list) and it does
not open a namespace, class, struct, enum, union or a braced initialiser (`= {`).
Exits 1 naming each file and function over its limit; --report lists the largest instead.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import sys

FOLDERS = ("base", "schedules", "sim", "exec", "kernels", "viz", "harness", "cli", "python",
           "scenario")
SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
CONTAINER = re.compile(r"\b(namespace|class|struct|enum|union)\b")


def blank(text: str) -> str:
    """Replaces comments and string/char literals by spaces, keeping newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == "":
            j = i
            while True:  # a directive, with its continuation lines
                j = text.find("\n", j)
                if j < 0 or text[j - 1] != "\\":
                    break
                j += 1
            j = n if j < 0 else j
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and (text[i - 1].isalnum()):
                out.append(c)  # digit separator such as 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def opens_function(before: str) -> tuple[bool, str]:
    """Whether a brace preceded by `before` (the statement text since the last ; { or }) opens a
    function body, and the function's name as best read."""
    stmt = before.strip()
    if not stmt or stmt.startswith("#"):
        return False, ""
    stmt = "\n".join(l for l in stmt.splitlines() if not l.strip().startswith("#"))
    if CONTAINER.search(stmt.split("(")[0]):
        return False, ""
    if re.search(r"=\s*$", stmt) or re.search(r"\breturn\b", stmt):
        return False, ""
    head = stmt.split("(")[0]
    if "=" in head:
        return False, ""
    if ")" not in stmt:
        return False, ""
    m = re.search(r"([~\w:]+(?:<[^()]*>)?|operator[^\s(]*)\s*\(", stmt)
    name = m.group(1) if m else "?"
    return True, name


def functions(text: str):
    """Yields (name, first line, last line) of each function body in the file."""
    src = blank(text)
    depth = 0              # total brace depth
    fn_depth = None        # depth at which the current function's body opened
    fn_name, fn_line = "", 0
    stmt_start = 0
    line = 1
    for i, c in enumerate(src):
        if c == "\n":
            line += 1
        elif c == "{":
            if fn_depth is None:
                is_fn, name = opens_function(src[stmt_start:i])
                if is_fn:
                    fn_depth, fn_name, fn_line = depth, name, line
            depth += 1
            stmt_start = i + 1
        elif c == "}":
            depth -= 1
            if fn_depth is not None and depth == fn_depth:
                yield fn_name, fn_line, line
                fn_depth = None
            stmt_start = i + 1
        elif c == ";":
            stmt_start = i + 1
        elif c == ":" and fn_depth is None:
            # `public:` and friends end a statement; a constructor's initialiser list does not
            prev = src[stmt_start:i].strip()
            if prev in ("public", "private", "protected"):
                stmt_start = i + 1


def sources(root: pathlib.Path):
    for folder in FOLDERS:
        base = root / folder
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if p.suffix in SUFFIXES and p.is_file():
                yield p


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--max-file", type=int, default=450)
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args(argv)
    root = pathlib.Path(args.root)
    files, fns, bad = [], [], []
    for p in sources(root):
        text = p.read_text(encoding="utf-8", errors="replace")
        rel = p.relative_to(root)
        nlines = text.count("\n")
        files.append((nlines, str(rel)))
        if nlines > args.max_file:
            bad.append(f"{rel}: {nlines} lines (limit {args.max_file})")
        for name, first, last in functions(text):
            length = last - first + 1
            fns.append((length, f"{rel}:{first} {name}"))
            if length > args.max_function:
                bad.append(f"{rel}:{first}: function {name} is {length} lines "
                           f"(limit {args.max_function})")
    if args.report:
        for n, what in sorted(files, reverse=True)[:15]:
            print(f"file {n:5d} {what}")
        for n, what in sorted(fns, reverse=True)[:40]:
            print(f"fn   {n:5d} {what}")
        return 0
    if not files:
        print(f"code_size: no sources under {root}", file=sys.stderr)
        return 1
    for b in bad:
        print(b)
    print(f"code_size: {len(files)} files, {len(fns)} functions, {len(bad)} over the limits")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
