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
