#!/usr/bin/env python3
"""Every relative link of the README and the guides resolves: the file exists and, for
`file.md#anchor` / `#anchor`, the heading does (GitHub's slugs). docs/layout.md names every
folder of src/. Exit 1 with one line per broken link.   check_links.py [--root DIR]"""
import argparse, os, re, sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.M)
FENCE = re.compile(r"^(    |\t).*$", re.M)  # indented code blocks: no links in them


def slug(heading):
    """GitHub's anchor of a heading: lowercase, markup and punctuation dropped, spaces to '-'."""
    h = re.sub(r"[`*]", "", heading.strip().lower())
    h = re.sub(r"(?<!\w)_+|_+(?!\w)", "", h)  # _emphasis_ goes, do_predict's underscore stays (as GitHub)
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for h in HEADING.findall(open(path, encoding="utf-8").read()):
        s = slug(h)
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def check_file(root, path):
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    problems = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        where = os.path.relpath(path, root)
        if not os.path.exists(dest):
            problems.append(f"{where}: link to {target}: {os.path.relpath(dest, root)} does not exist")
        elif frag and dest.endswith(".md") and frag not in anchors(dest):
            problems.append(f"{where}: link to {target}: no heading #{frag} in {os.path.relpath(dest, root)}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    root = os.path.abspath(ap.parse_args().root)
    pages = [os.path.join(root, "README.md")] + sorted(
        os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    pages += [os.path.join(root, p) for p in ("docker/README.md", "src/model/README.md", "src/parallel/README.md",
                                              "src/kernels/README.md", "src/ui/README.md") if os.path.exists(os.path.join(root, p))]
    problems = [p for page in pages for p in check_file(root, page)]
    layout = open(os.path.join(root, "docs", "layout.md"), encoding="utf-8").read()
    for d in sorted(os.listdir(os.path.join(root, "src"))):
        if os.path.isdir(os.path.join(root, "src", d)) and f"`src/{d}`" not in layout:
            problems.append(f"docs/layout.md: src/{d} is not listed")
    for p in problems:
        print(p)
    print(f"links: {len(pages)} pages, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
