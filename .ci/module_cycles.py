#!/usr/bin/env python3
"""Report import cycles among sibling modules of each crate (issue 9).

For every module directory `m` in a crate, the children of `m` form a graph:
child `a` -> child `b` when any file of `a` (or of its descendants) names
`b` through `crate::<path to m>::b`, `super::b` (from a direct child file),
or `self::b`. Parent-to-child references are not edges (a parent re-exports
its children), and neither are references to the parent's own items. Any
strongly connected component of two or more children is a cycle; the script
prints them and exits 1.

Usage: .ci/module_cycles.py [CRATE_SRC_DIR ...]   (default: crates/*/src)
"""
import glob
import os
import re
import sys

USE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def module_path(src, file):
    rel = os.path.relpath(file, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


def strip_tests(text):
    # Drop `#[cfg(test)] mod … { … }` blocks: test code may reach anywhere.
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [tree]
    prefix, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    return [x for p in parts if p for x in expand_use(prefix + p)]


def refs(src, file):
    me = module_path(src, file)
    text = strip_tests(open(file, encoding="utf-8").read())
    text = re.sub(r"//[^\n]*", "", text)
    uses = [u for m in re.finditer(r"\buse\s+([^;]+);", text) for u in expand_use(m.group(1))]
    text = text + "\n" + "\n".join(uses)
    for m in USE.finditer(text):
        head, tail = m.group(1), m.group(2).split("::")[1:]
        if head == "crate":
            yield tail
        elif head == "self":
            yield me + tail
        else:  # super
            base = me[:-1]
            # super::super::x
            while tail and tail[0] == "super":
                base, tail = base[:-1], tail[1:]
            yield base + tail


def cycles(src):
    files = glob.glob(os.path.join(src, "**", "*.rs"), recursive=True)
    mods = {tuple(module_path(src, f)) for f in files}
    edges = {}
    for f in files:
        me = tuple(module_path(src, f))
        for r in refs(src, f):
            # longest known module prefix of r
            target = None
            for k in range(len(r), 0, -1):
                if tuple(r[:k]) in mods:
                    target = tuple(r[:k])
                    break
            if target is None:
                continue
            # common parent of me and target: the siblings under it
            n = 0
            while n < min(len(me), len(target)) and me[n] == target[n]:
                n += 1
            if n >= len(me) or n >= len(target):
                continue  # ancestor/descendant: not a sibling edge
            a, b = me[: n + 1], target[: n + 1]
            edges.setdefault(me[:n], {}).setdefault(a, set()).add(b)
    found = []
    for parent, g in edges.items():
        for scc in tarjan(g):
            if len(scc) > 1:
                found.append(sorted("::".join(s) for s in scc))
    return found


def tarjan(g):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in list(g):
        if v not in index:
            visit(v)
    return out


def main():
    srcs = sys.argv[1:] or sorted(glob.glob("crates/*/src"))
    bad = 0
    for src in srcs:
        for c in cycles(src):
            bad += 1
            print(f"{src}: import cycle among {', '.join(c)}")
    if bad:
        sys.exit(1)
    print(f"no import cycles among sibling modules in {len(srcs)} crates")


if __name__ == "__main__":
    main()
