#!/usr/bin/env python3
"""The include graph follows the declared layer order, and no two modules include each other.

    python3 tests/layering.py [SOURCE_DIR]      (ctest: `layering`)

Layers, bottom first (docs/architecture.md): a file may include files of its own folder and of
the folders below it, never of a folder above it.

    base <- kernels <- runtime <- runtime/data <- collectives <- models <- launch <- tools

runtime/data/ (the data library, CMake target dp_data) is a layer of its own above the runtime core:
the core (the rest of runtime/) never includes it.

A module is a file path without its extension (x.h, x.cpp, x.cu and x.cuh are one module);
module A depends on module B when a file of A includes a header of B. The module graph must have
no cycle. Every finding is printed as `file:line: ...`; the exit status is 1 when there is any.
"""
import os
import re
import sys

LAYERS = ["base", "kernels", "runtime", "runtime/data", "collectives", "models", "launch", "tools"]
TOPS = [layer for layer in LAYERS if "/" not in layer]  # the folders walked (runtime/ holds runtime/data/)
EXTS = (".h", ".cuh", ".cpp", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def source_files(root):
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(EXTS):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def includes(root, path):
    with open(os.path.join(root, path), errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1)


def layer_of(path):
    """The layer of a source path or include: the deepest entry of LAYERS that is a prefix of it."""
    parts = path.replace(os.sep, "/").split("/")
    return "/".join(parts[:2]) if "/".join(parts[:2]) in LAYERS else parts[0]


def module(path):
    return os.path.splitext(path)[0]


def find_cycles(edges):
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def check(root):
    problems = []
    files = list(source_files(root))
    known = set(files)
    edges, where = {}, {}
    for path in files:
        top = layer_of(path)
        for line, inc in includes(root, path):
            inc_top = layer_of(inc)
            if inc_top not in LAYERS:
                continue  # a system or third-party header, or a build-generated one
            if inc not in known:
                problems.append(f"{path}:{line}: includes \"{inc}\", which does not exist")
                continue
            if LAYERS.index(inc_top) > LAYERS.index(top):
                problems.append(f"{path}:{line}: {top}/ includes \"{inc}\" from {inc_top}/, a higher layer "
                                f"(order: {' <- '.join(LAYERS)})")
            a, b = module(path), module(inc)
            if a != b:
                edges.setdefault(a, set()).add(b)
                where.setdefault((a, b), f"{path}:{line}")
    for comp in find_cycles(edges):
        members = set(comp)
        links = [f"{where[(a, b)]} ({a} -> {b})" for a in comp for b in sorted(edges.get(a, ())) if b in members]
        problems.append("include circle between modules " + ", ".join(comp) + ": " + "; ".join(links))
    return files, problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    files, problems = check(os.path.abspath(root))
    if not files:
        print(f"layering: no source files under {root}", file=sys.stderr)
        return 1
    for p in problems:
        print(p)
    print(f"layering: {len(files)} files, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
