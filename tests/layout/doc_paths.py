#!/usr/bin/env python3
"""Holds the documentation to the tree: every repository path that README.md or a page under
docs/ names must exist, so that a file moved or removed is not left named in the prose.

Usage: doc_paths.py ROOT
A path is a run of `name/name/...` whose first part is a folder at ROOT's top (sim, exec,
scripts, docs, ...) or `stagecraft` (an include path). It is found when it exists at ROOT, or,
written short as `<folder>/<file>`, as `<folder>/include/stagecraft/<folder>/<file>` (a public
header) or `<folder>/src/<file>`; an include path `stagecraft/...` under any `<folder>/include/`.
`{a,b}` expands to each alternative. A relative Markdown link target `](page.md)` must exist
beside its page. Not checked: URLs, paths under build/, paths with a glob (`*`) or a `<...>` or
`$` placeholder, paths with an upper-case placeholder part (`scripts/NAME.sh`), anything below
another path (`../shared/DESIGN.md`, `github.com/x/sim/y.h`), and CHANGELOG.md (history names
what was there then). Exits 1 naming each page, line and path not found.
"""
from __future__ import annotations

import itertools
import pathlib
import re
import sys

SEG = r"(?:[\w.\-*]|\{[\w.,\-*]*\})+"
# Not preceded by a path character: `../shared/x` and `host/sim/x` start no path at `shared` or
# `sim`. Followed by a placeholder character (`<`, `$`), the path is a prefix of one.
PATH = re.compile(rf"(?<![\w./\-~$@{{}}*])({SEG}(?:/{SEG})+/?)(?![\w<$])")
URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s)>`\"']*")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"^[A-Z]{2,}(_\w+)?$")  # NAME, MODULE, NAME_test
BRACES = re.compile(r"\{([^{}]*)\}")


def expand(path: str) -> list[str]:
    """`a_{x,y}.csv` -> [a_x.csv, a_y.csv]."""
    parts = BRACES.split(path)  # literal, alternatives, literal, ...
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def skipped(path: str) -> bool:
    if "*" in path or path.startswith("build/") or path.startswith("build-"):
        return True
    return any(PLACEHOLDER.match(part.split(".")[0]) for part in path.split("/") if part)


def found(root: pathlib.Path, path: str) -> bool:
    first, _, rest = path.partition("/")
    if first == "stagecraft":
        return any((inc / path).exists() for inc in root.glob("*/include"))
    candidates = [root / path]
    if rest:
        candidates += [root / first / "include" / "stagecraft" / first / rest, root / first / "src" / rest]
    return any(c.exists() for c in candidates)


def docs(root: pathlib.Path) -> list[pathlib.Path]:
    pages = [root / "README.md", root / "CONTRIBUTING.md"]
    pages += sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []
    return [p for p in pages if p.is_file()]


def check_page(root: pathlib.Path, page: pathlib.Path, tops: set[str]):
    """Yields (line number, path) for each path the page names that is not in the tree."""
    for number, line in enumerate(page.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        line = URL.sub(" ", line)
        for target in LINK.findall(line):
            target = target.split("#")[0]
            if not target or "shared/" in target or target.startswith(("/", "mailto:")):
                continue
            resolved = (page.parent / target).resolve()
            if resolved.is_relative_to(root.resolve()) and not resolved.exists():
                yield number, target
        for match in PATH.finditer(line):
            text = match.group(1).rstrip(".,:;")
            first = text.split("/")[0]
            if first not in tops and first != "stagecraft":
                continue
            for path in expand(text):
                if not skipped(path) and not found(root, path):
                    yield number, path


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: doc_paths.py ROOT", file=sys.stderr)
        return 2
    root = pathlib.Path(args[0])
    tops = {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "build"))}
    pages = docs(root)
    if not pages:
        print(f"doc_paths: no README.md or docs/*.md under {root}", file=sys.stderr)
        return 1
    missing = []
    for page in pages:
        rel = page.relative_to(root)
        missing += [f"{rel}:{number}: {path}: no such path in the repository"
                    for number, path in check_page(root, page, tops)]
    for m in missing:
        print(m)
    print(f"doc_paths: {len(pages)} pages, {len(missing)} paths not found")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
