#!/usr/bin/env python3
"""Fails on an import cycle between the modules of a crate.

Usage: tools/check-layers.py [--info] CRATE_SRC...   (for example `src shim/format/src`)

Each file is a module (a folder's `mod.rs` is the folder's module). Module A depends on
module B when A's non-test code names a path into B: `use crate::..`, `super::..`,
`self::..`, an inline `crate::b::f()`, or a path through a module a `use` brought in. A
module's own submodules are part of it, not imports: `lib.rs` naming `timeline::Timeline`
is the module tree, and `timeline.rs` using `crate::SyncCause` is then no cycle. So are the
crate root's re-exports of its modules (`pub(crate) use base::clock;`): `crate::clock` is
`crate::base::clock`, wherever it is named. A strongly
connected component of more than one module is a cycle: the script lists each one with the
line behind every edge in it and exits 1.
With --info it prints the same and exits 0 (a crate whose cycle is known and not yet
removed). Test code (items under `#[cfg(test)]` or `#[test]`, and files declared so) is left
out: tests may reach anywhere. Standard library only.
"""

import re
import sys
from pathlib import Path

TOKEN = re.compile(r"::|[A-Za-z_][A-Za-z0-9_]*|\S")


def raw_string_start(text, i):
    """The match of a raw string's opening (`r"`, `r#"`, `br"`) at text[i], if one is."""
    if text[i] not in "br" or (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
        return None
    return re.match(r'b?r(#*)"', text[i : i + 80])


def strip_comments_and_literals(text):
    """`text` with comments, strings and char literals blanked (newlines kept, so line
    numbers stay), leaving lifetimes alone."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif raw := raw_string_start(text, i):
            end = '"' + raw.group(1)
            j = text.find(end, i + raw.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i : j + 1]))
            i = j + 1
        elif c == "'" and (m := re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])):
            out.append(" " * m.end())
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tokens(text):
    """(token, line) pairs of code without comments and literals."""
    code = strip_comments_and_literals(text)
    line_starts = [0] + [m.end() for m in re.finditer("\n", code)]
    result = []
    line = 0
    for m in TOKEN.finditer(code):
        while line + 1 < len(line_starts) and line_starts[line + 1] <= m.start():
            line += 1
        result.append((m.group(), line + 1))
    return result


def skip_group(toks, i):
    """Index after the bracketed group opening at toks[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[toks[i][0]]]
    i += 1
    while i < len(toks) and stack:
        t = toks[i][0]
        if t in pairs:
            stack.append(pairs[t])
        elif t == stack[-1]:
            stack.pop()
        i += 1
    return i


def is_test_attribute(toks, i):
    """Whether the attribute at toks[i] (`#`) is `#[test]` or `#[cfg(test)]`."""
    words = [t for t, _ in toks[i : skip_group(toks, i + 1)]]
    return words in (["#", "[", "test", "]"], ["#", "[", "cfg", "(", "test", ")", "]"])


def without_tests(toks):
    """`toks` less every item under a test attribute, and the names of the modules declared
    there (`#[cfg(test)] mod name;`), whose files are test code."""
    kept, test_mods = [], set()
    i = 0
    while i < len(toks):
        if toks[i][0] == "#" and i + 1 < len(toks) and toks[i + 1][0] == "[" and is_test_attribute(toks, i):
            j = skip_group(toks, i + 1)
            while j + 1 < len(toks) and toks[j][0] == "#" and toks[j + 1][0] == "[":
                j = skip_group(toks, j + 1)
            item_start = j
            while j < len(toks) and toks[j][0] not in (";", "{"):
                j = skip_group(toks, j) if toks[j][0] in "([" else j + 1
            words = [t for t, _ in toks[item_start:j]]
            if j < len(toks) and toks[j][0] == ";":
                if "mod" in words:
                    test_mods.add(words[words.index("mod") + 1])
                i = j + 1
            else:
                i = skip_group(toks, j) if j < len(toks) else j
            continue
        kept.append(toks[i])
        i += 1
    return kept, test_mods


def use_paths(toks, i):
    """The paths of the `use` tree starting at toks[i], as (segments, alias), and the index
    after its `;`."""
    paths = []

    def tree(i, prefix):
        segs = list(prefix)
        while i < len(toks):
            t = toks[i][0]
            if t == "{":
                i += 1
                while toks[i][0] != "}":
                    i = tree(i, segs)
                    if toks[i][0] == ",":
                        i += 1
                return i + 1
            if t == "*":
                paths.append((segs, None))
                return i + 1
            if t == "::":
                i += 1
                continue
            if t in (",", "}", ";"):
                paths.append((segs, segs[-1] if segs else None))
                return i
            if t == "as":
                paths.append((segs, toks[i + 1][0]))
                return i + 2
            segs = segs + [t]
            i += 1
        return i

    i = tree(i, [])
    while i < len(toks) and toks[i][0] != ";":
        i += 1
    return paths, i + 1


class Crate:
    def __init__(self, src):
        self.src = Path(src)
        root = self.src / "lib.rs"
        if not root.exists():
            root = self.src / "main.rs"
        self.files = {}  # module path (tuple) -> (file, tokens without tests)
        self.discover((), root)
        self.reexports = self.root_reexports()

    def discover(self, module, file):
        toks, test_mods = without_tests(tokens(file.read_text()))
        self.files[module] = (file, toks)
        base = file.parent if file.name in ("lib.rs", "main.rs", "mod.rs") else file.with_suffix("")
        for i in range(len(toks) - 2):
            if toks[i][0] == "mod" and toks[i + 2][0] == ";" and toks[i + 1][0] not in test_mods:
                name = toks[i + 1][0]
                child = next(
                    (p for p in (base / f"{name}.rs", base / name / "mod.rs") if p.exists()),
                    None,
                )
                if child is None:
                    sys.exit(f"check-layers: {file}: no file for `mod {name};`")
                self.discover(module + (name,), child)

    def root_reexports(self):
        """{name: module} of the modules the crate root re-exports under `name`. Like its
        `mod` declarations they are the module tree: without them every path through a
        re-export would end at the root and hide the module it names."""
        _, toks = self.files[()]
        found = {}
        for i, (t, _) in enumerate(toks):
            if t != "use":
                continue
            for segs, alias in use_paths(toks, i + 1)[0]:
                module = tuple(segs[1:] if segs[:1] in (["crate"], ["self"]) else segs)
                if alias and module in self.files:
                    found[alias] = module
        return found

    def target(self, absolute):
        """The deepest file module that the absolute path `absolute` goes through."""
        if absolute and absolute[0] in self.reexports:
            absolute = list(self.reexports[absolute[0]]) + list(absolute[1:])
        module = ()
        for seg in absolute:
            if module + (seg,) not in self.files:
                break
            module += (seg,)
        return module

    def edges(self):
        """{(from, to): (file, line)} of the first reference from module to module."""
        found = {}
        for module, (file, toks) in self.files.items():
            aliases = {}
            scope = [module]  # the inline modules entered, innermost last
            braces = []  # per open brace: whether it opened an inline module

            def absolute(segs):
                head, here = segs[0], scope[-1]
                if head == "crate":
                    return list(segs[1:])
                if head in ("self", "super"):
                    rest = list(segs)
                    while rest and rest[0] in ("self", "super"):
                        if rest.pop(0) == "super":
                            here = here[:-1]
                    return list(here) + rest
                if head in aliases:
                    return aliases[head] + list(segs[1:])
                return None

            def note(segs, line):
                path = absolute(segs)
                if path is None:
                    return None
                to = self.target(path)
                if to[: len(module)] != module:
                    found.setdefault((module, to), (file, line))
                return path

            i = 0
            while i < len(toks):
                t, line = toks[i]
                if t == "pub" and i + 1 < len(toks) and toks[i + 1][0] == "(":
                    i = skip_group(toks, i + 1)  # pub(in crate::x) is visibility
                    continue
                if t == "mod" and i + 2 < len(toks) and toks[i + 2][0] == "{":
                    scope.append(scope[-1] + (toks[i + 1][0],))
                    braces.append(True)
                    i += 3
                    continue
                if t == "{":
                    braces.append(False)
                elif t == "}" and braces:
                    if braces.pop():
                        scope.pop()
                elif t == "use":
                    paths, i = use_paths(toks, i + 1)
                    for segs, alias in paths:
                        if segs and segs[0] == "self" and len(segs) == 1:
                            continue
                        path = note(segs, line) if segs else None
                        if path is not None and alias and alias != "self":
                            aliases[alias] = path
                        elif path is not None and alias == "self":
                            aliases[segs[-1]] = path
                    continue
                elif re.match(r"[A-Za-z_]", t) and i + 2 < len(toks) and toks[i + 1][0] == "::" and (
                    i == 0 or toks[i - 1][0] not in ("::", "$")
                ):
                    segs = [t]
                    j = i + 1
                    while j + 1 < len(toks) and toks[j][0] == "::" and re.match(r"[A-Za-z_]", toks[j + 1][0]):
                        segs.append(toks[j + 1][0])
                        j += 2
                    note(segs, line)
                    i = j
                    continue
                i += 1
        return found


def strongly_connected(nodes, graph):
    """Tarjan's components of `graph` ({node: set of nodes})."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return components


def name(module):
    return "::".join(("crate",) + module)


def check(src):
    """Prints the crate's cycles; returns how many there are."""
    crate = Crate(src)
    edges = crate.edges()
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    cycles = [c for c in strongly_connected(crate.files, graph) if len(c) > 1]
    print(f"{src}: {len(crate.files)} modules, {len(edges)} imports, {len(cycles)} import cycle(s)")
    for cycle in cycles:
        members = set(cycle)
        print(f"  cycle of {len(cycle)} modules: {', '.join(name(m) for m in cycle)}")
        for (a, b), (file, line) in sorted(edges.items()):
            if a in members and b in members:
                print(f"    {name(a)} -> {name(b)}  ({file}:{line})")
    return len(cycles)


def main(args):
    info = "--info" in args
    roots = [a for a in args if a != "--info"]
    if not roots:
        sys.exit(__doc__.strip().splitlines()[2])
    cycles = sum(check(root) for root in roots)
    return 1 if cycles and not info else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
