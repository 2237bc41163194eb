#!/usr/bin/env python3
# check_deps.py — no circle between the files of the library and the CLI.
#
#   python3 tools/check_deps.py compiler cli     (make check-deps)
#
# Reads every .c and .h of the directories given and draws an edge A -> B
# when A includes B ("B.h" found in one of the directories), or when A calls
# a function that B defines (a non-static definition at the start of a line,
# with its body; a file's own static function of the same name wins).
# Calls are found in the code with comments, strings and character literals
# blanked out, so a name in a comment is not a call.  It fails (exit 1)
# on:
#   * any circle between files (a strongly connected component of more than
#     one file), printed with one call or include per edge as evidence;
#   * a file of the first directory (the library) including a header of a
#     later one (the CLI).
# The nodes are files: a header only declares (its prototypes are not
# calls), so it points at the headers it includes and nothing else; a call
# points at the .c file that defines the function, wherever it is declared.
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
DEF_RE = re.compile(r"^(?!static\b)(?!typedef\b)[A-Za-z_][^;(){}=]*?\b(" + IDENT + r")\s*\(([^;{}]*?)\)\s*\{",
                    re.M | re.S)
STATIC_DEF_RE = re.compile(r"^static\b[^;(){}=]*?\b(" + IDENT + r")\s*\([^;{}]*?\)\s*\{", re.M | re.S)
CALL_RE = re.compile(r"\b(" + IDENT + r")\s*\(")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined", "_Alignof", "_Static_assert",
            "_Generic", "alignof", "offsetof", "__attribute__", "va_arg"}


def blank_code(text):
    """Comments, strings and char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_preprocessor(code):
    """#define bodies and other directives removed (a macro is not a definition)."""
    lines, cont = [], False
    for line in code.split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            lines.append("")
        else:
            lines.append(line)
    return "\n".join(lines)


def unit(path):
    return path


def read_files(dirs):
    files = {}
    for d in dirs:
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                p = os.path.join(d, name)
                with open(p, encoding="utf-8", errors="replace") as f:
                    files[p] = f.read()
    return files


def build_graph(dirs, files):
    """edges[unitA][unitB] = evidence string."""
    defined, statics, calls, includes = {}, {}, {}, {}
    for p, text in files.items():
        raw = INCLUDE_RE.findall(text)
        code = strip_preprocessor(blank_code(text))
        includes[p] = raw
        statics[p] = set(STATIC_DEF_RE.findall(code))
        if p.endswith(".c"):
            for name, _ in DEF_RE.findall(code):
                if name not in KEYWORDS:
                    defined.setdefault(name, set()).add(unit(p))
        calls[p] = set(CALL_RE.findall(code)) - KEYWORDS if p.endswith(".c") else set()
    edges = {}
    problems = []
    lib_dir = os.path.normpath(dirs[0])
    for p in files:
        a = unit(p)
        for inc in includes[p]:
            target = None
            for d in [os.path.dirname(p)] + list(dirs):
                cand = os.path.normpath(os.path.join(d, inc))
                if cand in files:
                    target = cand
                    break
            if target is None:
                continue
            if os.path.dirname(p) == lib_dir and os.path.dirname(target) != lib_dir:
                problems.append(f"{p} includes {target}: the library must not include the CLI")
            b = unit(target)
            if b != a:
                edges.setdefault(a, {}).setdefault(b, f'#include "{inc}" in {p}')
        for name in sorted(calls[p]):
            if name in statics[p]:
                continue
            for b in sorted(defined.get(name, ())):
                if b != a:
                    edges.setdefault(a, {}).setdefault(b, f"{p} calls {name}()")
    return edges, problems


def components(nodes, edges):
    """Tarjan's strongly connected components, iterative."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main(argv):
    dirs = argv[1:] or ["compiler", "cli"]
    files = read_files(dirs)
    edges, problems = build_graph(dirs, files)
    nodes = sorted({unit(p) for p in files})
    for comp in components(nodes, edges):
        if len(comp) < 2:
            continue
        members = set(comp)
        lines = [f"  {a} -> {b}: {edges[a][b]}" for a in comp for b in sorted(edges.get(a, {}))
                 if b in members]
        problems.append("a circle between " + ", ".join(comp) + ":\n" + "\n".join(lines))
    for p in problems:
        print(f"check_deps: error: {p}", file=sys.stderr)
    if not problems:
        print(f"check_deps: {len(files)} files of {', '.join(dirs)}: no circle, "
              f"no include of {', '.join(dirs[1:]) or '-'} from {dirs[0]}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
