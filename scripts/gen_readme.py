#!/usr/bin/env python3
"""Regenerates the README's generated sections from lf-train's own declarations.

Each section sits between two markers:

    <!-- generated: lf-train keys --markdown (scripts/gen_readme.py) -->
    ...
    <!-- end generated -->

and is replaced by what that lf-train command prints. With --check nothing is written:
the exit code is 1 when the README is stale (a ctest runs this), with a diff.

    scripts/gen_readme.py [--lf-train build/src/launcher/lf-train] [--check] [README.md]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("readme", nargs="?", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--lf-train", default=os.environ.get("LF_TRAIN_BIN") or
                    os.path.join(ROOT, os.environ.get("BUILD_DIR", "build"), "src/launcher/lf-train"))
    ap.add_argument("--check", action="store_true", help="fail (exit 1, with a diff) when the README is stale")
    args = ap.parse_args()
    with open(args.readme, encoding="utf-8") as f:
        old = f.read()
    if not BEGIN.search(old):
        sys.exit(f"gen_readme: {args.readme} has no generated sections")
    new = render(args.lf_train, old)
    if args.check:
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       "README.md", "README.md (generated)"))
            print("\nREADME.md is stale: run scripts/gen_readme.py (after building lf-train)")
            return 1
        return 0
    if new != old:
        with open(args.readme, "w", encoding="utf-8") as f:
            f.write(new)
        print(f"updated {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
