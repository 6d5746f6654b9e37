#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Cross-file call graph of the module's dm-target/*.c, and its layer check.

The layers are the dm-target objects in Kbuild's NXD_OBJS, bottom first.
A file may use functions and globals of the files listed before it, never of
one listed after it (an upward call) and so never in a cycle.  Read from
the sources as text: comments, strings and character constants are
stripped, functions are the names defined at brace depth 0 with a body,
globals are the names a dm-target header declares extern.  A use is any
mention of such a name in another file (a call, a function pointer, a
macro body).  kernel/ is below every dm-target file and is not checked,
but for its headers: the #include "..." graph of dm-target/ and kernel/
must have no cycle either.

  scripts/callgraph.py            check; exit 1 on a cycle or upward call
  scripts/callgraph.py -v         also print every edge with its names
  scripts/callgraph.py --dot      the graph in Graphviz dot
"""
import argparse
import os
import re
import sys

KEYWORDS = {'if', 'for', 'while', 'switch', 'return', 'sizeof', 'do',
            'else', 'case', 'goto', 'typeof', '__attribute__', 'defined'}
IDENT = re.compile(r'[A-Za-z_]\w*')


def strip(text):
    """Blank comments, strings and char constants, keeping line numbers."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + re.sub(r'[^\n]', ' ', text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def no_cpp(text):
    """Blank preprocessor lines (with their continuations)."""
    lines = text.split('\n')
    cont = False
    for k, line in enumerate(lines):
        if cont or line.lstrip().startswith('#'):
            cont = line.endswith('\\')
            lines[k] = ''
    return '\n'.join(lines)


def functions(code):
    """Names defined at depth 0 as `name(...) {`, but for static ones."""
    code = no_cpp(code)
    names = set()
    depth = 0
    stmt = 0			# where the current depth-0 declaration began
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
            stmt = i + 1
        elif c == ';' and depth == 0:
            stmt = i + 1
        elif depth == 0 and (c.isalpha() or c == '_'):
            m = IDENT.match(code, i)
            name = m.group(0)
            i = m.end()
            j = i
            while j < n and code[j].isspace():
                j += 1
            if j < n and code[j] == '(' and name not in KEYWORDS:
                k, par = j, 0
                while k < n:
                    par += {'(': 1, ')': -1}.get(code[k], 0)
                    k += 1
                    if par == 0:
                        break
                while k < n and code[k].isspace():
                    k += 1
                if k < n and code[k] == '{' and \
                   not re.search(r'\bstatic\b', code[stmt:i]):
                    names.add(name)
            continue
        i += 1
    return names


def externs(code):
    return set(re.findall(r'\bextern\b[^;(]*?\b([A-Za-z_]\w*)\s*;', code))


def kbuild_order(top):
    with open(os.path.join(top, 'Kbuild')) as f:
        text = f.read()
    return [m + '.c' for m in re.findall(r'\bdm-target/([\w-]+)\.o\b', text)]


def build(top):
    d = os.path.join(top, 'dm-target')
    srcs = sorted(f for f in os.listdir(d) if f.endswith('.c'))
    hdrs = sorted(f for f in os.listdir(d) if f.endswith('.h'))
    code = {}
    for f in srcs + hdrs:
        with open(os.path.join(d, f)) as fh:
            code[f] = strip(fh.read())
    globs = set()
    for h in hdrs:
        globs |= externs(code[h])
    owner = {}
    for f in srcs:
        defs = functions(code[f])
        for g in globs:
            # a definition: the name outside any extern declaration
            for line in code[f].split('\n'):
                if re.search(r'\b%s\b' % g, line) and \
                   not line.lstrip().startswith('extern') and \
                   not line.startswith((' ', '\t')):
                    defs.add(g)
                    break
        for name in defs:
            # static functions of the same name in two files stay local
            owner.setdefault(name, set()).add(f)
    edges = {}
    for f in srcs:
        mine = {n for n, fs in owner.items() if f in fs}
        used = re.sub(r'\b(struct|union|enum)\s+\w+', ' ', code[f])
        for name in set(IDENT.findall(used)) - mine:
            for g in owner.get(name, ()):
                edges.setdefault((f, g), set()).add(name)
    return srcs, edges


def includes(top):
    """The #include "..." edges among dm-target/ and kernel/ files."""
    files = {}
    for d in ('dm-target', 'kernel'):
        for f in sorted(os.listdir(os.path.join(top, d))):
            if f.endswith(('.c', '.h')):
                files.setdefault(f, os.path.join(top, d, f))
    edges = {}
    for f, path in files.items():
        with open(path) as fh:
            for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', fh.read(),
                                 re.M):
                g = os.path.basename(m.group(1))
                if g in files:
                    edges[(f, g)] = {g}
    return sorted(files), edges


def sccs(nodes, edges):
    """Tarjan: the strongly connected components of more than one file."""
    succ = {n: sorted(b for (a, b) in edges if a == n) for n in nodes}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-v', '--verbose', action='store_true')
    ap.add_argument('--dot', action='store_true')
    ap.add_argument('--top', default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..'))
    a = ap.parse_args()
    srcs, edges = build(a.top)
    order = kbuild_order(a.top)
    if a.dot:
        print('digraph nxd {')
        for (x, y), names in sorted(edges.items()):
            print('\t"%s" -> "%s" [label="%d"];' % (x, y, len(names)))
        print('}')
        return 0
    bad = 0
    for f in srcs:
        if f not in order:
            print('callgraph: dm-target/%s is not in Kbuild' % f)
            bad = 1
    rank = {f: k for k, f in enumerate(order)}
    uses = sum(len(v) for v in edges.values())
    print('callgraph: %d files, %d file edges, %d names used across files' %
          (len(srcs), len(edges), uses))
    for (x, y), names in sorted(edges.items(),
                                key=lambda e: (rank.get(e[0][0], -1),
                                               rank.get(e[0][1], -1))):
        up = x in rank and y in rank and rank[y] > rank[x]
        if up or a.verbose:
            print('  %s %s -> %s: %s' % ('UP' if up else '  ', x, y,
                                         ' '.join(sorted(names))))
        if up:
            bad = 1
    for comp in sccs(srcs, edges):
        print('callgraph: cycle among %s' % ' '.join(comp))
        bad = 1
    inodes, iedges = includes(a.top)
    for comp in sccs(inodes, iedges) + [[x] for (x, y) in iedges if x == y]:
        print('callgraph: include cycle among %s' % ' '.join(comp))
        bad = 1
    print('callgraph: layers, bottom first: %s' % ' '.join(order))
    print('callgraph: %s' % ('FAILED (upward call or cycle)' if bad
                             else 'calls go downward only'))
    return bad


if __name__ == '__main__':
    sys.exit(main())
