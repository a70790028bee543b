#!/usr/bin/env python3
"""The size rules of DESIGN.md "Style", checked: no source file under src/ over 600 lines, no
function over 80 lines (lizard's count, from the signature to the closing brace), except those
listed in scripts/code_size_exceptions.txt with the reason. Also fails on an exception that is no
longer needed, so the list cannot rot.   check_code_size.py [--root DIR]   (exit 77: no lizard)"""
import argparse, os, subprocess, sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
SOURCES = (".cpp", ".h", ".cu", ".cuh")


def exceptions(root):
    """{"path" or "path:function": reason}"""
    out = {}
    for line in open(os.path.join(root, "scripts", "code_size_exceptions.txt")):
        line = line.strip()
        if line and not line.startswith("#"):
            what, _, why = line.partition(" ")
            assert why.strip(), f"code_size_exceptions.txt: `{what}` gives no reason"
            out[what] = why.strip()
    return out


def long_files(root):
    for d, _, files in os.walk(os.path.join(root, "src")):
        for f in files:
            if f.endswith(SOURCES):
                p = os.path.join(d, f)
                n = sum(1 for _ in open(p, errors="replace"))
                if n > MAX_FILE_LINES:
                    yield os.path.relpath(p, root), n


def long_functions(root):
    import lizard  # noqa: PLC0415 (a dev dependency: scripts/requirements-dev.txt)
    for d, _, files in os.walk(os.path.join(root, "src")):
        for f in files:
            if f.endswith((".cpp", ".cu")):
                info = lizard.analyze_file(os.path.join(d, f))
                for fn in info.function_list:
                    if fn.length > MAX_FUNCTION_LINES:
                        yield os.path.relpath(os.path.join(d, f), root), fn.name, fn.start_line, fn.length


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    root = os.path.abspath(ap.parse_args().root)
    try:
        import lizard  # noqa: F401
    except ImportError:
        print("SKIP: the lizard package is not installed (pip install lizard)")
        return 77
    allowed, used, problems = exceptions(root), set(), []
    for path, n in long_files(root):
        if path in allowed:
            used.add(path)
        else:
            problems.append(f"{path}: {n} lines (> {MAX_FILE_LINES}): split it by concept, or list it in "
                            "scripts/code_size_exceptions.txt with the reason")
    for path, name, line, n in long_functions(root):
        key = f"{path}:{name.split('::')[-1]}"
        if key in allowed:
            used.add(key)
        else:
            problems.append(f"{path}:{line}: {name} is {n} lines (> {MAX_FUNCTION_LINES}): split it, or list "
                            f"`{key}` in scripts/code_size_exceptions.txt with the reason")
    for key in sorted(set(allowed) - used):
        problems.append(f"scripts/code_size_exceptions.txt: `{key}` is within the limits now: remove the line")
    for p in problems:
        print(p)
    print(f"code size: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
