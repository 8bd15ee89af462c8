"""The inputs whose ``analyze --json`` documents are held equal across the schema-3 renames (issue 40).

Each case is (name, argv after ``analyze``). ``python tests/analysis/doc_cases.py DIR`` writes each case's
document (or its exit status and error line) to DIR/NAME.json.gz; tests/data/docs-schema2/ holds what the code
wrote before the renames (main at 421b706), and tests/analysis/test_doc_renames.py compares today's output to it
through the rename table in docs/json-output.md.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from shared_paths import REALTRACES  # noqa: E402

SAMPLES = REPO / "traces" / "samples"

#: Extra --op runs on real traces whose draws are not the exponential.
OPS = {
    "hta/tests/data/nccl_parser_config/nccl_data.json.gz": "nccl",
    "pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite": "saxpy",
    "hta/tests/data/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz": "uniform",
    "msinsight/server/src/test/test_data/full_db/msprof_0.db": "MatMul",
}
#: A second run of every real trace over common device ops, so traces without a draw still give figures.
OP_ANY = "(?i)gemm|nccl|matmul|memcpy|add|mul"
_SKIP = re.compile(r"(PROVENANCE\.md|LICENSE|\.txt)$")


def _name(rel: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", rel)


def cases() -> list[tuple[str, list[str]]]:
    """Every committed sample recording and every real trace (files and Ascend folders), plus the --op runs."""
    out: list[tuple[str, list[str]]] = []
    for d in ("tiny-cpu-off-on/01-off", "tiny-cpu-off-on/02-on", "tiny-cpu-off-on", "tiny-cpu-switchback",
              "tiny-cpu-sequential"):
        out.append((_name("samples/" + d), [str(SAMPLES / d)]))
    for p in sorted(REALTRACES.rglob("*")):
        rel = p.relative_to(REALTRACES).as_posix()
        if p.is_dir() and p.name.endswith("_ascend_pt"):
            out.append((_name(rel), [str(p)]))
        elif p.is_file() and not _SKIP.search(rel) and "_ascend_pt/" not in rel:
            out.append((_name(rel), [str(p)]))
    for name, argv in [c for c in out if not c[0].startswith("samples_")]:
        out.append((name + "--op-any", [*argv, "--op", OP_ANY]))
    for rel, op in OPS.items():
        out.append((_name(rel) + "--op-" + op, [str(REALTRACES / rel), "--op", op]))
    # Two recordings, one of two ranks: the cluster view of one recording among several (it names its recording).
    two = [str(REALTRACES / "msinsight/test/data/pytorch/text" / d) for d in ("level1", "level0")]
    out.append(("msinsight-level1-and-level0--op-any", [*two, "--op", OP_ANY]))
    return out


def placeless(obj, places: tuple[tuple[str, str], ...] | None = None):
    """``obj`` with this checkout's and the real traces' absolute paths written ``<repo>`` and ``<realtraces>``,
    so documents written on one machine compare with another's (CI clones the repository elsewhere)."""
    places = places or ((str(REALTRACES), "<realtraces>"), (str(REPO), "<repo>"))
    if isinstance(obj, str):
        for path, name in places:
            obj = obj.replace(path, name)
        return obj
    if isinstance(obj, list):
        return [placeless(x, places) for x in obj]
    if isinstance(obj, dict):
        return {placeless(k, places): placeless(v, places) for k, v in obj.items()}
    return obj


def document(argv: list[str]) -> dict:
    """``analyze ARGV --json``: the document (paths :func:`placeless`), or {"exit": code, "error": last stderr
    line}."""
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    p = subprocess.run([sys.executable, "-m", "expo_prof", "analyze", *argv, "--json", "-q", "--jobs", "1"],
                       capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    if p.returncode:
        return placeless({"exit": p.returncode, "error": (p.stderr.strip().splitlines() or [""])[-1]})
    return placeless(json.loads(p.stdout))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)

    def one(case):
        name, argv = case
        doc = document(argv)
        (out / f"{name}.json.gz").write_bytes(gzip.compress(json.dumps(doc, sort_keys=True).encode(), mtime=0))
        return name, doc.get("exit", 0)

    with ThreadPoolExecutor(2) as ex:
        for name, code in ex.map(one, cases()):
            print(code, name)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
