"""The two halves meet only at the event-log file format.

GIVEN each half imported in a fresh interpreter where the other half's heavy
libraries cannot be imported, THEN every module of it still imports, and the
forbidden libraries were never loaded.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCKED = set({blocked!r})
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split('.')[0] in BLOCKED:
                raise ImportError(f'blocked by boundary test: {{name}}')
            return None
    sys.meta_path.insert(0, Block())
    import pkgutil, importlib
    pkg = importlib.import_module({pkg!r})
    names = [pkg.__name__] + [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.') if not m.name.endswith('__main__')]
    for n in names:
        importlib.import_module(n)
    {{extra}}
    leaked = sorted(m for m in sys.modules if m.split('.')[0] in BLOCKED)
    assert not leaked, leaked
    print(len(names))
    """
)


def _run(pkg: str, blocked: list[str], extra: str = "") -> int:
    code = _BLOCKER.format(blocked=blocked, pkg=pkg).replace("{extra}", extra)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return int(proc.stdout.strip().splitlines()[-1])


def test_offline_tool_imports_without_torch_or_vllm():
    # GIVEN torch, torch_npu and vllm unimportable (a laptop)
    # WHEN every module of expo_prof is imported, and the CLI's help is built
    n = _run(
        "expo_prof",
        ["torch", "torch_npu", "vllm", "overlay_internal_never"],
        extra="from click.testing import CliRunner\n"
        "from expo_prof.cli.main import cli\n"
        "r = CliRunner().invoke(cli, ['--help'])\n"
        "assert r.exit_code == 0, r.output",
    )
    # THEN all of them imported (the package is not empty) and nothing heavy leaked
    assert n >= 5


def test_overlay_imports_without_offline_libraries_or_torch():
    # GIVEN rich, plotly, click and expo_prof unimportable, and torch/vllm too
    # WHEN every overlay module is imported and the plugin registered with the switch off
    n = _run(
        "overlay",
        ["rich", "plotly", "click", "expo_prof", "torch", "vllm", "torch_npu"],
        extra="import os\n"
        "os.environ.pop('EXPO_PROF_ASYNC_EXPONENTIAL', None)\n"
        "os.environ.pop('VLLM_ASCEND_ENABLE_ASYNC_EXPONENTIAL', None)\n"
        "from overlay.plugin import register\n"
        "register()",
    )
    # THEN they import lazily: nothing of torch/vllm or the offline side was loaded
    assert n >= 3


# ------------------------------------------------------------------------------------------------ layering
#: The rules, with a reason each, live in tools/layering.py, the rule kinds and the import graph in
#: tools/importgraph.py (docs/architecture.md, "Layering").
sys.path.insert(0, str(ROOT / "tools"))
import importgraph  # noqa: E402
import layering  # noqa: E402

DOC = ROOT / "docs" / "architecture.md"


@pytest.fixture(scope="module")
def graph() -> importgraph.Graph:
    return layering.read_graph(ROOT)


def test_every_layering_rule_holds(graph):
    # GIVEN the import graph of both halves (module-level, lazy and typing-only imports)
    # WHEN every rule of tools/layering.py is checked over it, transitively where the rule says so
    problems = layering.check(graph)
    # THEN none fails (each failure prints the import path, the rule and its reason)
    assert not problems, "\n\n".join(map(str, problems))


def test_the_graph_holds_every_module_and_the_kind_of_each_import(graph):
    # GIVEN the graph read from the tree WHEN a few imports known from the sources are looked up
    files = {p.relative_to(ROOT).as_posix() for half in layering.HALVES for p in (ROOT / half).rglob("*.py")}
    # THEN every module is a node, and each import has the kind of where it is written
    assert {f.as_posix() for f in graph.files.values()} == files
    assert graph.edges["overlay.sampler"]["overlay.guard"].kind == importgraph.MODULE
    assert graph.edges["overlay.plugin"]["overlay.sampler"].kind == importgraph.LAZY  # inside enable()
    assert graph.edges["expo_prof.readers.host_ranges"]["overlay.contract"].kind == importgraph.MODULE
    assert "torch" in graph.edges["overlay.sampler"] and graph.edges["overlay.sampler"]["torch"].kind == importgraph.LAZY


def test_architecture_doc_layering_block_is_current():
    # GIVEN the rules WHEN the block they generate is compared with docs/architecture.md's
    # THEN they are the same
    assert layering.documented(DOC.read_text(encoding="utf-8")) == layering.docs_block(), (
        "docs/architecture.md's layering table is stale: run `python tools/layering.py --write-docs`")


# ---- the checker itself, on small made-up trees ----
def _tree(root: Path, files: dict[str, str]) -> importgraph.Graph:
    for name, text in {"expo_prof/__init__.py": "", "overlay/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return layering.read_graph(root)


def _failures(rules, graph) -> list[str]:
    return [str(f) for rule in rules for f in rule.check(graph)]


def test_a_cycle_through_a_lazy_import_is_reported_with_its_path(tmp_path):
    # GIVEN guard importing sampler inside a function, and sampler importing guard at module level
    graph = _tree(tmp_path, {
        "overlay/guard.py": "def f():\n    from overlay.sampler import active\n",
        "overlay/sampler.py": "from overlay import guard\n",
        "overlay/lanes.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from overlay.sampler import x\n",
        "overlay/rng.py": "import overlay.lanes\n",
    })
    # WHEN the overlay's module-level no-cycle rule is checked
    out = _failures([importgraph.NoCycle("overlay", reason="r")], graph)
    # THEN the one cycle is reported, each step with its kind and line; a typing-only import closes none
    assert out == ["overlay.guard\n      → overlay.sampler  (lazy, overlay/guard.py:2)"
                   "\n      → overlay.guard  (module, overlay/sampler.py:1)"
                   "\n    breaks: no import cycle between the modules of `overlay`\n    because: r"]


def test_a_package_cycle_is_found_even_when_no_module_meets_itself(tmp_path):
    # GIVEN readers.a → pipeline.b and pipeline.c → readers.d: no module cycle, a package one
    graph = _tree(tmp_path, {
        "expo_prof/readers/__init__.py": "", "expo_prof/readers/a.py": "from expo_prof.pipeline import b\n",
        "expo_prof/readers/d.py": "", "expo_prof/pipeline/__init__.py": "", "expo_prof/pipeline/b.py": "",
        "expo_prof/pipeline/c.py": "from expo_prof.readers.d import x\n",
    })
    # WHEN both granularities are checked THEN only the package rule fails, naming the two packages
    assert _failures([importgraph.NoCycle("expo_prof", reason="r")], graph) == []
    out = _failures([importgraph.NoCycle("expo_prof", reason="r", packages=True)], graph)
    assert len(out) == 1 and out[0].startswith("expo_prof.pipeline\n      → expo_prof.readers\n      → expo_prof.pipeline")


def test_forbidden_imports_are_found_through_other_modules(tmp_path):
    # GIVEN expo_prof taking only overlay.contract, which itself imports overlay.guard, which imports torch
    graph = _tree(tmp_path, {
        "expo_prof/reader.py": "from overlay.contract import SPAN\n",
        "overlay/contract.py": "import json\nfrom overlay import guard\n",
        "overlay/guard.py": "import torch\n",
    })
    rules = [importgraph.NoDep("expo_prof", ("overlay",), unless=("overlay.contract",), reason="r"),
             importgraph.NoDep("expo_prof", ("torch",), reason="r"), importgraph.StdlibOnly("overlay.contract", reason="r")]
    # WHEN the rules are checked
    out = _failures(rules, graph)
    # THEN each failure shows the whole chain from an expo_prof module; the contract's stdlib import is fine
    heads = [f.split("\n    breaks")[0].replace(" ", "").split("\n") for f in out]
    assert heads == [
        ["expo_prof.reader", "→overlay.contract(module,expo_prof/reader.py:1)", "→overlay.guard(module,overlay/contract.py:2)"],
        ["expo_prof.reader", "→overlay.contract(module,expo_prof/reader.py:1)", "→overlay.guard(module,overlay/contract.py:2)",
         "→torch(module,overlay/guard.py:1)"],
        ["overlay.contract", "→overlay.guard(module,overlay/contract.py:2)"],
    ]


def test_only_module_level_chains_count_for_a_lazy_only_rule(tmp_path):
    # GIVEN torch imported inside a function by one module, and at module level under another's import
    graph = _tree(tmp_path, {
        "overlay/lanes.py": "def run():\n    import torch\n",
        "overlay/plugin.py": "import overlay.hw\n",
        "overlay/hw.py": "import torch.cuda\n",
    })
    # WHEN "never at module level" is checked
    out = _failures([importgraph.NoDep("overlay", ("torch",), kinds=frozenset({importgraph.MODULE}), reason="r")], graph)
    # THEN only hw's import fails (once, though plugin reaches it too); the lazy one is allowed
    assert [f.split("\n    breaks")[0] for f in out] == ["overlay.hw\n      → torch  (module, overlay/hw.py:1)"]


def test_layers_and_gaps_in_the_table(tmp_path):
    # GIVEN a tree whose readers import the analysis, and a package with no rule
    graph = _tree(tmp_path, {
        "expo_prof/timeline.py": "", "expo_prof/errors.py": "",
        "expo_prof/readers/__init__.py": "from expo_prof.timeline import T\nfrom expo_prof.errors import E\n",
        "expo_prof/readers/x.py": "def f():\n    from expo_prof.analysis import hidden\n",
        "expo_prof/analysis/__init__.py": "", "expo_prof/analysis/hidden.py": "",
    })
    rules = [layering.layer(("expo_prof.readers",), ("expo_prof.timeline",), "r"),
             layering.layer(("expo_prof.timeline", "expo_prof.errors", "expo_prof"), (), "r"),
             layering.layer(("expo_prof.gone",), None, "r")]
    # WHEN the table is checked
    out = [str(p) for p in layering.check(graph, rules)]
    # THEN the lazy import across layers fails (errors is a shared leaf), the package without a rule and the
    # rule without a package are named, and so is every transitional rename whose module is gone
    assert out[0].startswith("expo_prof.readers.x\n      → expo_prof.analysis.hidden  (lazy, expo_prof/readers/x.py:2)")
    assert out[1:3] == [
        "package expo_prof.analysis has no layer rule: add a Layer to RULES in tools/layering.py",
        "layer rule for expo_prof.gone, which does not exist: remove or rename it in tools/layering.py"]
    assert len(out) == 3 + len(layering.RENAMED)
