"""An import graph of Python packages, read with :mod:`ast`, and rules checked over it (tools/layering.py).

Modelled on Perfetto's ``tools/check_imports.py``: rules are objects, each with the reason it exists,
that yield their failures over the graph — transitively where a rule is about what a module pulls in,
not what it names. The graph has one node per module of the packages read (nothing is imported), and
each import is of one kind:

* ``module`` — at module level: runs when the module is imported;
* ``lazy`` — inside a function: runs when that function is first called;
* ``typing`` — under ``if TYPE_CHECKING:``: never runs (annotations only).

Importing ``a.b.c`` is an edge to ``a.b.c`` (the parent packages it also initialises are not edges);
``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``. A module outside
the packages read is one node per top-level name (``torch``, ``rich``, ``json``).
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MODULE, LAZY, TYPING = "module", "lazy", "typing"
#: Stronger kinds win when a module imports the same one twice (at module level and in a function).
_STRENGTH = {TYPING: 0, LAZY: 1, MODULE: 2}
#: The imports that run: what a module pulls in, and what can close a cycle.
RUNTIME = frozenset({MODULE, LAZY})
EVERY_KIND = frozenset({MODULE, LAZY, TYPING})


# ------------------------------------------------------------------------------------------------ the graph
@dataclass(frozen=True)
class Edge:
    """One import: of ``dst``, of ``kind``, at ``line`` of the importing module."""

    dst: str
    kind: str
    line: int


def first_two(module: str) -> str:
    """The default package of a module: ``expo_prof.readers.chrome`` → ``expo_prof.readers``."""
    return ".".join(module.split(".")[:2])


@dataclass
class Graph:
    """Every module read → the modules it imports (one edge per target, its strongest kind)."""

    edges: dict[str, dict[str, Edge]] = field(default_factory=dict)
    #: module → its file, relative to the tree's root (``overlay/guard.py``)
    files: dict[str, Path] = field(default_factory=dict)
    #: module → the package (layer) it belongs to; by default its first two name parts
    unit: Callable[[str], str] = first_two

    def internal(self) -> list[str]:
        """The modules read (not the outside ones they import), sorted."""
        return sorted(self.files)

    def out(self, module: str, kinds: frozenset[str] = EVERY_KIND) -> list[Edge]:
        """The imports of ``module`` of the given kinds, by target name."""
        return sorted((e for e in self.edges.get(module, {}).values() if e.kind in kinds), key=lambda e: e.dst)


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    """``expo_prof/readers/__init__.py`` → (``expo_prof.readers``, True: a package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_pkg else parts), is_pkg


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of ``tree`` with its kind (function bodies are lazy, TYPE_CHECKING is typing)."""

    def walk(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, kind
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                yield from walk(stmt, TYPING)
            for stmt in node.orelse:
                yield from walk(stmt, kind)
            return
        inner = LAZY if kind == MODULE and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else kind
        for child in ast.iter_child_nodes(node):
            yield from walk(child, inner)

    yield from walk(tree, MODULE)


def _longest_known(name: str, known: set[str]) -> str:
    """The deepest module read that ``name`` names or lies in (``a.b.X`` → ``a.b``)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return parts[0]


def _targets(node: ast.Import | ast.ImportFrom, me: str, is_pkg: bool, known: set[str], tops: set[str]) -> list[str]:
    """The modules one import statement makes ``me`` depend on (``tops``: the packages read)."""
    if isinstance(node, ast.Import):
        return [_longest_known(a.name, known) if a.name.split(".")[0] in tops else a.name.split(".")[0]
                for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = me.split(".") if is_pkg else me.split(".")[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([base] if base else []))
    if base.split(".")[0] not in tops:
        return [base.split(".")[0]]
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else _longest_known(base, known) for a in node.names]


def read_graph(root: Path, packages: Sequence[str], unit: Callable[[str], str] | None = None) -> Graph:
    """The import graph of the ``packages`` (folders) under ``root``; ``unit``: each module's package."""
    sources = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            name, is_pkg = _module_name(path, root)
            sources[name] = (path, is_pkg)
    known, tops = set(sources), set(packages)
    graph = Graph(files={name: path.relative_to(root) for name, (path, _) in sources.items()}, unit=unit or first_two)
    for me, (path, is_pkg) in sources.items():
        out: dict[str, Edge] = {}
        for node, kind in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for dst in _targets(node, me, is_pkg, known, tops):
                if dst == me or dst == "__future__":
                    continue
                old = out.get(dst)
                if old is None or _STRENGTH[kind] > _STRENGTH[old.kind]:
                    out[dst] = Edge(dst, kind, node.lineno)
        graph.edges[me] = out
    return graph


# ------------------------------------------------------------------------------------------------ the rules
def within(name: str, prefixes: str | Iterable[str]) -> bool:
    """``name`` is one of ``prefixes`` or inside one (``expo_prof.readers.chrome`` is within ``expo_prof``)."""
    for p in [prefixes] if isinstance(prefixes, str) else prefixes:
        if name == p or name.startswith(p + "."):
            return True
    return False


@dataclass(frozen=True)
class Failure:
    """A broken rule, with the import path that breaks it (each step's kind and line)."""

    rule: Rule
    path: tuple[str, ...]
    how: tuple[str, ...] = ()

    def __str__(self) -> str:
        hows = self.how or ("",) * (len(self.path) - 1)
        steps = [self.path[0]] + [f"{dst}  ({how})" if how else dst for dst, how in zip(self.path[1:], hows)]
        return "\n      → ".join(steps) + f"\n    breaks: {self.rule.says()}\n    because: {self.rule.reason}"


def _how(graph: Graph, path: Sequence[str]) -> tuple[str, ...]:
    """Each step of ``path``: the import's kind and where it is (``lazy, overlay/guard.py:56``)."""
    out = []
    for a, b in zip(path, path[1:]):
        e = graph.edges[a][b]
        out.append(f"{e.kind}, {graph.files[a].as_posix()}:{e.line}")
    return tuple(out)


class Rule:
    """A layering rule: :meth:`check` yields its failures over a graph; :attr:`reason` says why it exists."""

    reason: str

    def check(self, graph: Graph) -> Iterator[Failure]:
        raise NotImplementedError

    def says(self) -> str:
        """The rule in one line (for failures and the docs)."""
        raise NotImplementedError


@dataclass(frozen=True)
class NoDep(Rule):
    """No module within ``src`` reaches ``dst`` by any chain of imports of ``kinds`` (transitive).

    ``unless``: parts of ``dst`` that may be imported (the chain is still followed through them).
    """

    src: str
    dst: tuple[str, ...]
    reason: str
    unless: tuple[str, ...] = ()
    kinds: frozenset[str] = EVERY_KIND

    def check(self, graph: Graph) -> Iterator[Failure]:
        seen_last: set[tuple[str, str]] = set()
        for start in graph.internal():
            if not within(start, self.src):
                continue
            for path in _reach(graph, start, self.kinds):
                last = path[-1]
                if within(last, self.dst) and not within(last, self.unless) and (path[-2], last) not in seen_last:
                    seen_last.add((path[-2], last))  # one failure per offending import
                    yield Failure(self, path, _how(graph, path))

    def says(self) -> str:
        at = " at module level (inside a function it may)" if self.kinds == frozenset({MODULE}) else ""
        but = f" but {_names(self.unless)}" if self.unless else ""
        return f"{_names([self.src])} never imports {_names(self.dst)}{but}{at}, directly or through other modules"


@dataclass(frozen=True)
class StdlibOnly(Rule):
    """Modules within ``src`` import nothing but Python's standard library (and each other)."""

    src: str
    reason: str

    def check(self, graph: Graph) -> Iterator[Failure]:
        for m in graph.internal():
            if within(m, self.src):
                for e in graph.out(m):
                    if not within(e.dst, self.src) and e.dst not in sys.stdlib_module_names:
                        yield Failure(self, (m, e.dst), _how(graph, (m, e.dst)))

    def says(self) -> str:
        return f"{_names([self.src])} imports only the standard library"


@dataclass(frozen=True)
class NoCycle(Rule):
    """No import cycle among the modules — or the packages — of ``src``, type-only (``TYPE_CHECKING``) imports
    included: a type-only circle does not fail at import time, but neither module can be read alone, and it is
    the first step to a runtime one.

    ``packages``: a package (``Graph.unit``) stands for all its modules; a cycle between packages
    (readers → pipeline → readers) is a layering knot even when no module meets itself.
    """

    src: str
    reason: str
    packages: bool = False

    def check(self, graph: Graph) -> Iterator[Failure]:
        nodes = [m for m in graph.internal() if within(m, self.src)]
        name = graph.unit if self.packages else (lambda m: m)
        succ: dict[str, set[str]] = {}
        for m in nodes:
            s = succ.setdefault(name(m), set())
            s.update(name(e.dst) for e in graph.out(m, EVERY_KIND) if within(e.dst, self.src) and name(e.dst) != name(m))
        for cycle in _cycles(succ):
            yield Failure(self, cycle, () if self.packages else _how(graph, cycle))

    def says(self) -> str:
        return f"no import cycle between the {'packages' if self.packages else 'modules'} of {_names([self.src])}"


@dataclass(frozen=True)
class Layer(Rule):
    """The packages ``src`` import (at any kind) only ``may`` and ``shared`` of their own tree; ``may=None``: anything.

    A package is a :attr:`Graph.unit` (``expo_prof.readers``: a module or a folder, whatever is inside it is
    one layer); imports of other trees (``overlay.contract``, ``numpy``) are for :class:`NoDep` rules.
    """

    src: tuple[str, ...]
    may: tuple[str, ...] | None
    reason: str
    #: leaves every layer may use (not repeated in each rule's ``may``)
    shared: tuple[str, ...] = ()

    def check(self, graph: Graph) -> Iterator[Failure]:
        if self.may is None:
            return
        allowed = {*self.may, *self.shared}
        for m in graph.internal():
            me = graph.unit(m)
            if me not in self.src:
                continue
            for e in graph.out(m):
                dst = graph.unit(e.dst)
                if within(e.dst, m.split(".")[0]) and dst != me and dst not in allowed:
                    yield Failure(self, (m, e.dst), _how(graph, (m, e.dst)))

    def says(self) -> str:
        may = "anything" if self.may is None else (_names(self.may) or "nothing") + (" and the shared leaves" if self.shared else "")
        return f"{_names(self.src)} may import {may}"


def _names(names: Iterable[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _reach(graph: Graph, start: str, kinds: frozenset[str]) -> Iterator[tuple[str, ...]]:
    """Breadth first from ``start``: the shortest import path to every module it reaches."""
    seen = {start}
    queue: deque[tuple[str, ...]] = deque([(start,)])
    while queue:
        path = queue.popleft()
        for e in graph.out(path[-1], kinds):
            if e.dst not in seen:
                seen.add(e.dst)
                yield path + (e.dst,)
                queue.append(path + (e.dst,))


def _cycles(succ: dict[str, set[str]]) -> Iterator[tuple[str, ...]]:
    """One shortest cycle (a → … → a) per strongly connected component of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(succ):
        if v not in index:
            connect(v)
    for comp in comps:
        start = min(comp)
        prev: dict[str, str] = {}
        queue = deque([start])
        while queue:
            v = queue.popleft()
            nxt = sorted(w for w in succ.get(v, ()) if w in comp)
            if start in nxt:
                path = [start, v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                yield tuple(reversed(path))
                break
            for w in nxt:
                if w not in prev:
                    prev[w] = v
                    queue.append(w)
