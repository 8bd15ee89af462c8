"""The layering of expo-prof's two halves: the rules as data, each with its reason (docs/architecture.md).

The rule kinds and the import graph they are checked over are in tools/importgraph.py (after Perfetto's
``tools/check_imports.py``); this module says which rules hold here, and why.

    python tools/layering.py               # check every rule; exit status 1 and the failures if any
    python tools/layering.py --write-docs  # regenerate the layering block of docs/architecture.md
    python tools/layering.py --graph       # print the module graph of both halves, with each edge's kind

tests/test_boundaries.py runs the same checks and fails when docs/architecture.md's block is stale.
How to add a rule: docs/architecture.md, "Layering".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from importgraph import LAZY, MODULE, TYPING, Failure, Graph, Layer, NoCycle, NoDep, Rule, StdlibOnly, within
from importgraph import read_graph as read_any

REPO = Path(__file__).resolve().parents[1]
HALVES = ("expo_prof", "overlay")
DOC = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- layering:begin (python tools/layering.py --write-docs) -->", "<!-- layering:end -->"


# ------------------------------------------------------------------------------------------------ the table
#: Leaves every layer of expo_prof may import: the error types (each carries its exit code), the words for
#: people, the statistics and their special functions (numpy and math only) and the version string.
EVERYWHERE = ("expo_prof.errors", "expo_prof.words", "expo_prof.paths", "expo_prof.stats", "expo_prof.special", "expo_prof.version")

#: A module being moved between packages is read as the package it moves into until the move lands; a stale
#: entry is an error (check()).
RENAMED: dict[str, str] = {}  # TRANSITIONAL: old module → its new package while a move is in flight (none now)


def unit_of(module: str) -> str:
    """The package (layer) a module belongs to: ``expo_prof.readers.chrome`` → ``expo_prof.readers``."""
    for old, new in RENAMED.items():
        if within(module, old):
            module = new + module[len(old):]
    return ".".join(module.split(".")[:2])


def read_graph(root: Path = REPO) -> Graph:
    """The import graph of both halves under ``root``, with today's names read as their target packages."""
    return read_any(root, HALVES, unit_of)


def layer(src: tuple[str, ...], may: tuple[str, ...] | None, reason: str) -> Layer:
    """A :class:`Layer` of expo_prof: ``may`` besides :data:`EVERYWHERE`."""
    return Layer(src, may, reason, shared=EVERYWHERE)


_LAYERS = [
    layer(("expo_prof.timeline", "expo_prof.errors", "expo_prof.words", "expo_prof.special", "expo_prof.version",
           "expo_prof.output", "expo_prof.console", "expo_prof.paths"), (),
          "leaves: the data model every reader produces and every analysis consumes, and small helpers; "
          "depending on nothing of expo_prof, any layer can use them without a cycle"),
    layer(("expo_prof.stats",), ("expo_prof.special",),
          "the statistics (t tests, sign-flip, power) over their special functions (incomplete beta and gamma); "
          "numpy only, used by abtest, switchback and verify"),
    layer(("expo_prof.clocks",), ("expo_prof.timeline",),
          "which clock a Timeline's times are on: a property of the data model, below readers and analysis"),
    layer(("expo_prof.readers",), ("expo_prof.timeline",),
          "readers know trace formats and produce Timelines; nothing above them leaks into parsing"),
    layer(("expo_prof.analysis",), ("expo_prof.timeline", "expo_prof.clocks"),
          "pure functions over Timelines: they know nothing of formats, files or output"),
    layer(("expo_prof.runs",), ("expo_prof.timeline", "expo_prof.clocks"),
          "run directories and recordings group Timelines; they read manifests, not traces"),
    layer(("expo_prof.pipeline",), ("expo_prof.readers", "expo_prof.analysis", "expo_prof.runs", "expo_prof.timeline"),
          "the one path from paths to a Result: every figure any command prints comes from it"),
    layer(("expo_prof.terminal",), ("expo_prof.pipeline", "expo_prof.analysis", "expo_prof.console"),
          "reporters render a Result (tables, JSON) and know nothing of parsing"),
    layer(("expo_prof.html",), ("expo_prof.pipeline", "expo_prof.analysis", "expo_prof.timeline", "expo_prof.clocks"),
          "the pages draw a Result and its Timelines; they never read a trace themselves"),
    layer(("expo_prof.export",), ("expo_prof.pipeline", "expo_prof.readers", "expo_prof.analysis", "expo_prof.timeline",
                                  "expo_prof.clocks", "expo_prof.html"),
          "the export passes a recording's sources through (readers: their timed events read again for Perfetto) "
          "with the analysis added as tracks, in the pages' colours and words (html)"),
    layer(("expo_prof.abtest",), ("expo_prof.pipeline", "expo_prof.runs"),
          "A/B triage compares runs, each measured by the same pipeline"),
    layer(("expo_prof.serving",), (),
          "the server process, the load and the tiny model: stdlib, numpy and the network, no analysis"),
    layer(("expo_prof.record",), ("expo_prof.pipeline", "expo_prof.readers", "expo_prof.runs", "expo_prof.serving",
                                  "expo_prof.console"),
          "record launches a server (serving), keeps a run directory (runs) and summarises it (pipeline); readers "
          "for one thing: exporting the run's Nsight Systems report to SQLite (readers.nsys.report)"),
    layer(("expo_prof.verify",), ("expo_prof.record", "expo_prof.serving"),
          "verify launches both sides through record (readiness, shutdown) and sends its requests through "
          "serving's one HTTP client; its χ² tests stand on the shared special functions"),
    layer(("expo_prof",), ("expo_prof.pipeline",),
          "the notebook API, expo_prof.analyze(paths): the pipeline's Result"),
    layer(("expo_prof.__main__",), ("expo_prof.cli",), "`python -m expo_prof` is the CLI"),
    layer(("expo_prof.cli",), None, "the commands put everything together; nothing imports them"),
]

_HEAVY = ("torch", "torch_npu", "vllm")
_OFFLINE = ("rich", "plotly", "click")

RULES: list[Rule] = [
    NoDep("expo_prof", ("overlay",), unless=("overlay.contract",),
          reason="the halves meet at the event-log format; `overlay.contract` holds what both must agree on "
                 "(variable names, schema version, span names), the rest of the overlay lives inside vLLM"),
    NoDep("overlay", ("expo_prof",) + _OFFLINE,
          reason="the overlay runs inside every vLLM process, where the offline tool and its libraries must never "
                 "load"),
    NoDep("expo_prof", _HEAVY,
          reason="the offline tool runs on a laptop or a login node without them (they are not among its "
                 "dependencies)"),
    NoDep("overlay", _HEAVY, kinds=frozenset({MODULE}),
          reason="vLLM loads the plugin in every process, before the overlay knows it applies; torch and vllm are "
                 "imported in `apply()`, so every module imports (and the overlay switches itself off) without them"),
    StdlibOnly("overlay.contract",
               reason="the offline tool imports it, so anything it imported would become the tool's dependency"),
    NoCycle("expo_prof", reason="with a cycle the import order matters, and neither module can be read alone"),
    NoCycle("overlay", reason="with a cycle the import order matters, and a half-imported module inside vLLM "
                              "fails there, not here"),
    NoCycle("expo_prof", packages=True, reason="the layers are a stack, so no package may reach itself"),
    NoCycle("overlay", packages=True, reason="the plugin sits on the patches, the patches on the sampler and the "
                                              "guard; nothing below reaches back up"),
    *_LAYERS,
]


# ------------------------------------------------------------------------------------------------ checking
def check(graph: Graph, rules: Sequence[Rule] = RULES) -> list[Failure | str]:
    """Every failure of every rule, plus any gap in the table itself (a package without a layer, a stale entry)."""
    problems: list[Failure | str] = [f for rule in rules for f in rule.check(graph)]
    layers = [r for r in rules if isinstance(r, Layer)]
    covered = {u for r in layers for u in r.src}
    units = {unit_of(m) for m in graph.internal() if within(m, "expo_prof")}
    problems += [f"package {u} has no layer rule: add a Layer to RULES in tools/layering.py" for u in sorted(units - covered)]
    problems += [f"layer rule for {u}, which does not exist: remove or rename it in tools/layering.py"
                 for u in sorted(covered - units)]
    problems += [f"RENAMED entry {old} → {new}: no module {old} is left, remove the entry from tools/layering.py"
                 for old, new in RENAMED.items() if not any(within(m, old) for m in graph.internal())]
    return problems


# ------------------------------------------------------------------------------------------------ the docs
def _short(unit: str) -> str:
    return "`expo_prof` (the root package)" if unit == "expo_prof" else f"`{unit.removeprefix('expo_prof.')}`"


def docs_block(rules: Sequence[Rule] = RULES) -> str:
    """The Markdown that docs/architecture.md holds between the layering markers."""
    lines = ["| package | may import | why |", "|---|---|---|"]
    for r in rules:
        if isinstance(r, Layer):
            may = "everything" if r.may is None else ", ".join(_short(u) for u in r.may) or "—"
            lines.append(f"| {', '.join(_short(u) for u in r.src)} | {may} | {r.reason} |")
    lines += ["", "Every package may also import " + ", ".join(_short(u) for u in EVERYWHERE) + ". Across the halves "
              "and within each:", ""]
    lines += [f"* {r.says()} — {r.reason}." for r in rules if not isinstance(r, Layer)]
    return "\n".join(lines)


def documented(doc: str) -> str:
    """The block now between the markers of ``doc``."""
    return doc[doc.index(BEGIN) + len(BEGIN):doc.index(END)].strip("\n")


def write_docs(path: Path = DOC) -> bool:
    """Rewrite the block in ``path``; True when it changed."""
    text = path.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    new = text[:start] + "\n" + docs_block() + "\n" + text[end:]
    path.write_text(new, encoding="utf-8")
    return new != text


def main(argv: Sequence[str] | None = None) -> int:
    """Check the rules (exit 1 on any failure), or write the docs, or print the graph."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write-docs", action="store_true", help=f"regenerate the layering block of {DOC.relative_to(REPO)}")
    ap.add_argument("--graph", action="store_true", help="print the import graph of both halves")
    args = ap.parse_args(argv)
    if args.write_docs:
        print(f"{DOC.relative_to(REPO)}: {'rewritten' if write_docs() else 'already current'}")
        return 0
    graph = read_graph()
    if args.graph:
        for m in graph.internal():
            for e in graph.out(m):
                print(f"{m} -> {e.dst}  ({e.kind}, line {e.line})")
        return 0
    problems = check(graph)
    for p in problems:
        print(f"  {p}\n")
    edges = [e for m in graph.internal() for e in graph.out(m)]
    print(f"{len(graph.files)} modules, {len(edges)} imports ({sum(e.kind == LAZY for e in edges)} lazy, "
          f"{sum(e.kind == TYPING for e in edges)} typing only), {len(RULES)} rules: "
          + (f"{len(problems)} failure(s)" if problems else "all hold"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
