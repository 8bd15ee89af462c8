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
#: Which package (or top-level module) of expo_prof may import which — the one path from paths to pages:
#: readers → timeline; analysis → timeline; runs / pipeline → readers, analysis; html / terminal / abtest →
#: pipeline; record → pipeline, runs, serving; cli → everything. Any package may import the root (``__version__``).
LAYERS: dict[str, set[str] | None] = {
    "timeline": set(),
    "errors": set(),
    "words": set(),
    "output": set(),
    "console": set(),
    "stats": set(),
    "special": set(),
    "clocks": {"timeline"},
    "readers": {"timeline", "errors"},
    "analysis": {"timeline", "clocks", "errors"},
    "runs": {"timeline", "clocks", "errors"},
    "pipeline": {"readers", "analysis", "runs", "timeline", "errors"},
    "terminal": {"pipeline", "analysis", "console", "errors"},
    "html": {"pipeline", "analysis", "timeline", "clocks", "errors"},
    "export": {"pipeline", "readers", "analysis", "timeline", "clocks", "errors", "html"},
    "abtest": {"pipeline", "runs", "errors"},
    # readers: the run's Nsight Systems report exported to SQLite at its end (readers.nsys.report.export_sqlite).
    "record": {"pipeline", "readers", "runs", "serving", "console", "errors"},
    # launching, the one HTTP client, the load generator and the tiny model: nothing of the analysis side.
    "serving": {"errors"},
    "verify": {"record", "serving", "errors"},
    "__init__": {"pipeline"},
    "__main__": {"cli"},
    "cli": None,  # the commands put everything together
}


def _imports_by_package() -> dict[str, set[str]]:
    """Every ``expo_prof.X`` each package imports, at module level or inside functions (ast, not a regex)."""
    import ast

    out: dict[str, set[str]] = {}
    pkg_root = ROOT / "expo_prof"
    for path in pkg_root.rglob("*.py"):
        rel = path.relative_to(pkg_root)
        me = rel.parts[0].removesuffix(".py")
        deps = out.setdefault(me, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + ([f"{node.module}.{a.name}" for a in node.names] if node.module == "expo_prof" else [])
            for n in names:
                parts = n.split(".")
                if parts[0] != "expo_prof" or len(parts) < 2 or parts[1] == me:
                    continue
                if (pkg_root / parts[1]).is_dir() or (pkg_root / f"{parts[1]}.py").is_file():
                    deps.add(parts[1])
    return out


#: Leaf modules every layer may use: the error types, the words for people, the statistics (numpy only) and
#: their special functions (math only).
BASE = {"errors", "words", "stats", "special"}


def test_every_package_imports_only_what_its_layer_allows():
    # GIVEN the layering table WHEN every import of every expo_prof module is read THEN none crosses it
    graph = _imports_by_package()
    assert set(graph) <= set(LAYERS), f"packages missing from the table: {sorted(set(graph) - set(LAYERS))}"
    bad = {pkg: sorted(deps - allowed - BASE) for pkg, deps in graph.items()
           if (allowed := LAYERS[pkg]) is not None and deps - allowed - BASE}
    assert not bad, f"imports across layers: {bad}"


def test_no_cycle_between_packages():
    # GIVEN the package import graph WHEN searched depth-first THEN no package reaches itself
    graph = _imports_by_package()
    state: dict[str, int] = {}

    def visit(p: str, path: list[str]) -> None:
        state[p] = 1
        for q in sorted(graph.get(p, ())):
            if state.get(q) == 1:
                raise AssertionError("import cycle: " + " → ".join(path + [p, q]))
            if q not in state:
                visit(q, path + [p])
        state[p] = 2

    for p in sorted(graph):
        if p not in state:
            visit(p, [])
