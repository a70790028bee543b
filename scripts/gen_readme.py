#!/usr/bin/env python3
"""Regenerates the generated sections of the README and the guides (docs/reference.md: the config
keys and the LF_* knobs) from lf-train's own declarations.

Each section sits between two markers:

    <!-- generated: lf-train keys --markdown (scripts/gen_readme.py) -->
    ...
    <!-- end generated -->

and is replaced by what that lf-train command prints. With --check nothing is written:
the exit code is 1 when the README is stale (a ctest runs this), with a diff.

    scripts/gen_readme.py [--lf-train build/src/launcher/lf-train] [--check] [FILE.md ...]
    (no FILE: README.md and every docs/*.md that holds a marker)
"""
import argparse
import difflib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = re.compile(r"<!-- generated: lf-train (?P<cmd>[a-z -]+) \(scripts/gen_readme\.py\) -->\n")
END = "<!-- end generated -->"


def render(lf_train, text):
    out, pos = [], 0
    for m in BEGIN.finditer(text):
        if m.start() < pos:
            continue
        end = text.find(END, m.end())
        if end < 0:
            sys.exit(f"gen_readme: no '{END}' after the marker for `lf-train {m['cmd']}`")
        body = subprocess.run([lf_train, *m["cmd"].split()], check=True, capture_output=True, text=True).stdout
        out += [text[pos:m.end()], body if body.endswith("\n") else body + "\n"]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def pages(given):
    if given:
        return given
    docs = os.path.join(ROOT, "docs")
    found = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return [p for p in found if BEGIN.search(open(p, encoding="utf-8").read())]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--lf-train", default=os.environ.get("LF_TRAIN_BIN") or
                    os.path.join(ROOT, os.environ.get("BUILD_DIR", "build"), "src/launcher/lf-train"))
    ap.add_argument("--check", action="store_true", help="fail (exit 1, with a diff) when a page is stale")
    args = ap.parse_args()
    files, stale = pages(args.files), 0
    if not files:
        sys.exit("gen_readme: no page holds a generated section")
    for path in files:
        with open(path, encoding="utf-8") as f:
            old = f.read()
        new = render(args.lf_train, old)
        name = os.path.relpath(path, ROOT)
        if args.check:
            if new != old:
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), name,
                                                           f"{name} (generated)"))
                print(f"\n{name} is stale: run scripts/gen_readme.py (after building lf-train)")
                stale += 1
        elif new != old:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"updated {name}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
