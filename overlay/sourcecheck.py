"""Does an unseen vLLM / vllm-ascend release match, where the overlay touches it, a release the matrix checked?

The overlay touches an engine in two ways:

* it **replaces** a function (``random_sample``): the replacement re-implements
  that function's body (same draws, same order), so the installed body must be
  identical, as normalised source text, to the body of a checked release;
* it **wraps** methods (the runner's ``execute_model``, its forward seam, the
  warm-up methods, ``profile_run``; the CPU sampler's ``forward_cpu``): the
  wrappers take ``*args`` and call the original once, so those must be present
  with the parameters of a checked release, and called where the overlay
  expects (the forward seam from ``execute_model``; ``random_sample`` from
  ``forward_native`` by its global name, which is how the replacement is reached).

:func:`fingerprint` reads exactly that out of a release's sources;
tools/overlay_matrix.py writes the fingerprint of every release it checked
into ``overlay/checked_sources.json`` (:data:`STORE`), and at server start :func:`check_installed_source`
fingerprints the installed package and compares (:func:`compare`). Both use
the same functions, so the check at start is the matrix's own.

Cheap by construction: no import of the engine (its files are found from the
top-level package's spec and read as text), and no parse of whole files —
each function is cut out of its file by indentation (:func:`cut`) and only
that piece is parsed: a few milliseconds for the five files, against ~70 ms
for one whole parse of vllm-ascend's 6,600-line runner. Where a cut does not
parse (a layout the cutter does not know), the whole file is parsed instead.

Normalised source text: the function's ``ast`` with its docstring removed,
written back by ``ast.unparse`` — comments, blank lines, quotes, line breaks
and the docstring do not count; any change of code does. Stdlib only.
"""

from __future__ import annotations

import ast
import bisect
import copy
import functools
import hashlib
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Methods wrapping exactly the model call inside ``execute_model``, newest first (overlay/patches/_runner.py).
FORWARD_SEAMS = ("_model_forward", "_generate_process_reqs_hidden_states")
#: Where ``q`` is launched when no forward seam exists: the batch is ready when it returns.
LAUNCH_SEAM = "_prepare_inputs"
#: The runner's warm-up methods (their sampler calls draw inline) and its memory profiling.
WARMUP_METHODS = ("_dummy_run", "_dummy_sampler_run")
PROFILE_METHOD = "profile_run"
#: The runner methods the wrappers hook besides the seam, in the order they are checked.
RUNNER_WRAPPED = ("execute_model", *WARMUP_METHODS, PROFILE_METHOD)


@dataclass(frozen=True)
class Targets:
    """What the overlay touches in one package's sources (paths relative to the site directory)."""

    #: The top-level import package (found with ``importlib.util.find_spec``, never imported).
    package: str
    #: (file, function) the overlay re-implements: compared by normalised source hash.
    replaced: tuple[tuple[str, str], ...]
    #: (file, "Class.method") wrapped outside the runner: compared by parameters.
    wrapped: tuple[tuple[str, str], ...]
    #: (file, "Class.method", global name) the method must call by that global name.
    calls: tuple[tuple[str, str, str], ...]
    #: (file, class) of the model runner whose seams are wrapped.
    runner: tuple[str, str]


TARGETS = {
    "vllm": Targets(
        package="vllm",
        replaced=(("vllm/v1/sample/ops/topk_topp_sampler.py", "random_sample"),),
        wrapped=(("vllm/v1/sample/ops/topk_topp_sampler.py", "TopKTopPSampler.forward_cpu"),),
        calls=(("vllm/v1/sample/ops/topk_topp_sampler.py", "TopKTopPSampler.forward_native", "random_sample"),),
        runner=("vllm/v1/worker/gpu_model_runner.py", "GPUModelRunner"),
    ),
    "vllm-ascend": Targets(
        package="vllm_ascend",
        replaced=(("vllm_ascend/sample/sampler.py", "random_sample"),),
        wrapped=(),
        calls=(("vllm_ascend/sample/sampler.py", "AscendTopKTopPSampler.forward_native", "random_sample"),),
        runner=("vllm_ascend/worker/model_runner_v1.py", "NPUModelRunner"),
    ),
}

# -- cutting one function out of a file ------------------------------------------------------

#: Every ``def`` / ``class`` header, with its indentation and name (one scan of the file).
_HEADER = re.compile(r"^( *)(?:async[ \t]+)?(def|class)[ \t]+(\w+)", re.MULTILINE)


@functools.cache
def _closer(indent: int) -> re.Pattern[str]:
    """A line that closes a block at ``indent``: code at that indentation or less that is not a comment nor a
    closing bracket (the ``) -> T:`` of a signature written over several lines)."""
    return re.compile(rf"^ {{0,{indent}}}(?=[^ \t\n)\]}}#])", re.MULTILINE)


class Indexed:
    """One file's lines, indexed once: where each ``def`` / ``class`` starts, at which indentation."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.lines = src.splitlines()
        #: Offset in ``src`` of each line's start (and of the end).
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line) + 1)
        offsets = {off: i for i, off in enumerate(self.starts)}
        #: (line, indent, "def" | "class", name) in file order.
        self.headers = [(offsets[m.start()], len(m[1]), m[2], m[3]) for m in _HEADER.finditer(src)
                        if m.start() in offsets]
        self._ends: dict[tuple[int, int], int] = {}

    def end(self, start: int, indent: int) -> int:
        """Index of the first line after the block whose header is line ``start`` (at ``indent``): the next line
        of code at that indentation or less (one regex search, not a loop over the block's lines)."""
        key = (start, indent)
        if key not in self._ends:
            m = _closer(indent).search(self.src, self.starts[min(start + 1, len(self.lines))])
            self._ends[key] = len(self.lines) if m is None else bisect.bisect_left(self.starts, m.start())
        return self._ends[key]

    def locate(self, qualname: str) -> tuple[int, int, int] | None:
        """(first line, line after the end, indentation) of ``qualname`` ("func" or "Class.method", top-level
        class); None when not defined there. The last definition wins, as when the module runs."""
        lo, hi, indent = 0, len(self.lines), 0
        name = qualname
        if "." in qualname:
            cls, name = qualname.split(".", 1)
            found = [ln for ln, ind, kind, nm in self.headers if ind == 0 and kind == "class" and nm == cls]
            if not found:
                return None
            lo = found[-1]
            hi = self.end(lo, 0)
            # The class's members sit at its body's first indentation.
            body = next((ln for ln in self.lines[lo + 1:hi] if ln.strip() and not ln.lstrip().startswith("#")), "")
            indent = len(body) - len(body.lstrip(" "))
        defs = [ln for ln, ind, kind, nm in self.headers
                if lo <= ln < hi and ind == indent and kind == "def" and nm == name]
        return (defs[-1], self.end(defs[-1], indent), indent) if defs else None

    def cut(self, qualname: str) -> str | None:
        """The source of ``qualname`` cut out by indentation (:meth:`locate`), dedented; None when not defined."""
        where = self.locate(qualname)
        if where is None:
            return None
        return textwrap.dedent("\n".join(self.lines[where[0]:where[1]])) + "\n"


def cut(src: str | Indexed, qualname: str) -> str | None:
    """:meth:`Indexed.cut` of ``src``."""
    return (src if isinstance(src, Indexed) else Indexed(src)).cut(qualname)


def _whole_parse(src: str, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """``qualname``'s node from a parse of the whole file (the slow, sure path)."""
    body: list[ast.stmt] = ast.parse(src).body
    parts = qualname.split(".")
    for part in parts[:-1]:
        cls = [n for n in body if isinstance(n, ast.ClassDef) and n.name == part]
        if not cls:
            return None
        body = cls[-1].body
    fns = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == parts[-1]]
    return fns[-1] if fns else None


def function(src: str | Indexed, qualname: str, whole: bool = False) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The parsed definition of ``qualname`` in ``src`` (None when it has none): its cut, else (or with ``whole``)
    from a parse of the whole file."""
    indexed = src if isinstance(src, Indexed) else Indexed(src)
    piece = None if whole else indexed.cut(qualname)
    if piece is not None:
        try:
            node = ast.parse(piece).body[0]
        except SyntaxError:
            node = None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return _whole_parse(indexed.src, qualname)


# -- what is compared ----------------------------------------------------------------------


def normalised(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """``fn`` as normalised source text: no docstring, no decorators, written back by ``ast.unparse``."""
    bare = copy.copy(fn)
    first = fn.body[0] if fn.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        bare.body = fn.body[1:] or [ast.Pass()]
    bare.decorator_list = []
    return ast.unparse(bare)


def source_hash(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The first 16 hex digits of the SHA-256 of :func:`normalised`."""
    return hashlib.sha256(normalised(fn).encode()).hexdigest()[:16]


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Parameter names in order (``*args`` / ``**kwargs`` with their stars)."""
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args]
    if a.vararg is not None:
        names.append("*" + a.vararg.arg)
    names += [p.arg for p in a.kwonlyargs]
    if a.kwarg is not None:
        names.append("**" + a.kwarg.arg)
    return names


def calls_self(fn: ast.AST, name: str) -> bool:
    """Whether ``fn`` calls ``self.<name>(...)``."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" for n in ast.walk(fn))


def calls_global(fn: ast.AST, name: str) -> bool:
    """Whether ``fn`` calls ``<name>(...)`` by its bare (module-global) name."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(fn))


def pick_seam(owns: Callable[[str], bool], has: Callable[[str], bool]) -> str | None:
    """The method a runner class is hooked at: a forward seam it defines, else the launch seam.

    ``owns(name)``: the class defines ``name`` itself; ``has(name)``: the class
    has it, inherited or not. The launch seam is used only when no forward seam
    exists at all; None when the class has neither. (The runner patch and this
    check pick it alike; read from one file, ``owns`` and ``has`` are the same.)
    """
    for name in FORWARD_SEAMS:
        if owns(name):
            return name
    if not any(has(name) for name in FORWARD_SEAMS) and has(LAUNCH_SEAM):
        return LAUNCH_SEAM
    return None


# -- fingerprints ---------------------------------------------------------------------------

Read = Callable[[str], "str | None"]


def fingerprint(dist: str, read: Read, whole: bool = False) -> dict[str, Any]:
    """What the overlay relies on in one release of ``dist``, from its sources (``read(path)``: text or None).

    ``{"replaced": {func: hash | None}, "calls": {"Class.method -> name": bool}, "seam": name | None,
    "seam_called": bool, "wrapped": {"Class.method": [params] | None}, "runner_file": bool}`` — None where the
    function is missing; the files are :data:`TARGETS`'. The runner's wrapped methods are ``execute_model``, the
    seam the class defines, and the warm-up and profiling methods. ``whole``: parse whole files instead of cuts
    (what the tests compare the cuts with).
    """
    t = TARGETS[dist]
    texts: dict[str, Indexed | None] = {}

    def node(path: str, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        if path not in texts:
            text = read(path)
            texts[path] = None if text is None else Indexed(text)
        src = texts[path]
        return None if src is None else function(src, qualname, whole)

    replaced = {}
    for path, name in t.replaced:
        fn = node(path, name)
        replaced[name] = None if fn is None else source_hash(fn)
    calls = {}
    for path, caller, callee in t.calls:
        fn = node(path, caller)
        calls[f"{caller} -> {callee}"] = fn is not None and calls_global(fn, callee)
    runner_path, cls = t.runner
    defined = lambda n: node(runner_path, f"{cls}.{n}") is not None  # noqa: E731
    seam = pick_seam(defined, defined)
    execute = node(runner_path, f"{cls}.execute_model")
    wrapped: dict[str, list[str] | None] = {}
    for path, qualname in t.wrapped:
        fn = node(path, qualname)
        wrapped[qualname] = None if fn is None else parameters(fn)
    for name in (RUNNER_WRAPPED[:1] + ((seam,) if seam else ()) + RUNNER_WRAPPED[1:]):
        fn = node(runner_path, f"{cls}.{name}")
        wrapped[f"{cls}.{name}"] = None if fn is None else parameters(fn)
    return {
        "replaced": replaced,
        "calls": calls,
        "seam": seam,
        "seam_called": bool(seam and execute is not None and calls_self(execute, seam)),
        "wrapped": wrapped,
        "runner_file": texts.get(runner_path) is not None,
    }


def applies(fp: Mapping[str, Any]) -> bool:
    """Whether a fingerprint is one the overlay runs on: every replaced function and call present, a seam called."""
    return (all(fp["replaced"].values()) and all(fp["calls"].values()) and bool(fp["seam"])
            and bool(fp["seam_called"]))


def _file_of(dist: str, qualname: str) -> str:
    """The file :data:`TARGETS` reads ``qualname`` (a fingerprint key's function) from."""
    t = TARGETS[dist]
    cls = qualname.split(".")[0]
    for path, name in t.replaced + t.wrapped + tuple((p, c) for p, c, _ in t.calls):
        if name == qualname or name.split(".")[0] == cls:
            return path
    return t.runner[0]


def compare(dist: str, installed: Mapping[str, Any], checked: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why ``installed`` does not match the checked releases of ``dist`` (``{version: fingerprint}``), naming the
    first function that fails; None when every replaced function is identical to a checked release's and every
    wrapped seam passes the checks. The failure names the newest checked release (the one compared with)."""
    if not checked:
        return f"no release of {dist} is recorded as checked"
    newest = max(checked, key=version_key)
    base = checked[newest]
    against = f"compared with {dist} {newest}, the newest checked"
    for name in base["replaced"]:
        got = installed["replaced"].get(name)
        if got is None:
            return f"{name} is missing from {_file_of(dist, name)} ({against})"
        if got not in {fp["replaced"].get(name) for fp in checked.values()}:
            return (f"{name} in {_file_of(dist, name)} differs from every checked release's (the overlay "
                    f"re-implements it; {against})")
    for key in base["calls"]:
        if not installed["calls"].get(key):
            caller, callee = key.split(" -> ")
            return (f"{caller} in {_file_of(dist, caller)} no longer calls {callee} by its name, where the overlay "
                    f"takes over ({against})")
    path, cls = TARGETS[dist].runner
    seam = installed["seam"]
    if seam is None:
        return (f"{cls} defines none of {', '.join(FORWARD_SEAMS + (LAUNCH_SEAM,))} in {path}, so q cannot be "
                f"launched before the forward pass ({against})")
    if not installed["seam_called"]:
        return f"{cls}.{seam} is no longer called from {cls}.execute_model, where q is launched ({against})"
    for name, want in base["wrapped"].items():
        if want is None:
            continue  # not wrapped in the newest checked release
        got = installed["wrapped"].get(name)
        if got is None:
            return f"{name} is missing from {_file_of(dist, name)}, where the overlay wraps it ({against})"
        seen = [fp["wrapped"][name] for fp in checked.values() if fp["wrapped"].get(name) is not None]
        if got not in seen:
            return f"{name} in {_file_of(dist, name)} takes ({', '.join(got)}), not ({', '.join(want)}) ({against})"
    return None


def version_key(version: str) -> tuple:
    """A sort key for release strings: numbers as numbers (0.30.0rc2 > 0.30.0rc1 > 0.29.0)."""
    parts = re.findall(r"\d+|[a-z]+", version.lower())
    # A final release sorts after its pre-releases: "rc" < "~" (the end marker).
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts) + ((1, "~"),)


# -- the installed package ------------------------------------------------------------------


def site_of(package: str) -> Path | None:
    """The directory holding ``package`` (its top-level spec, found without importing it); None when absent."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def reader(site: Path) -> Read:
    """``read(path)`` over the files under ``site`` (None for a missing or unreadable file)."""

    def read(path: str) -> str | None:
        try:
            return (site / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    return read


def v2_only_message() -> str:
    """The notice for a vLLM whose only runner is V2 (0.34 on: its sources have no V1 runner file)."""
    return ("this vLLM has only Model Runner V2 (V1 was removed), whose fused Gumbel kernel draws its own noise "
            "inside the kernel from a counter-based Murmur3 hash (murmur3_uniform32(seed, pos, token)) and accepts "
            "no pre-drawn noise; there is no q to move off the critical path")


@dataclass(frozen=True)
class SourceVerdict:
    """The check of an installed release the matrix has not seen."""

    #: Why the overlay steps aside, or None when it applies.
    reason: str | None
    #: The one line said when it applies (which release it matched).
    note: str | None = None


#: The fingerprint of every release the matrix checked and found the overlay applies to, by package and version
#: (GENERATED by tools/overlay_matrix.py; one release a line).
STORE = Path(__file__).with_name("checked_sources.json")


def checked_releases(dist: str) -> dict[str, Any]:
    """``{version: fingerprint}`` of the releases of ``dist`` the matrix checked (:data:`STORE`)."""
    import json

    return dict(json.loads(STORE.read_text(encoding="utf-8")).get(dist, {}))


def check_installed_source(dist: str, version: str, site: Path | None = None,
                           checked: Mapping[str, Mapping[str, Any]] | None = None, whole: bool = False) -> SourceVerdict:
    """Compare the installed ``dist`` (at ``version``, unseen) with the checked releases (module docstring).
    ``whole``: parse whole files rather than the functions' cuts (bench/bench_sourcecheck.py compares them)."""
    store = checked_releases(dist) if checked is None else checked
    root = site if site is not None else site_of(TARGETS[dist].package)
    if root is None:
        return SourceVerdict(f"{dist} {version}: its sources cannot be found, so the overlay cannot check them")
    installed = fingerprint(dist, reader(root), whole)
    head = f"{dist} {version} is not among the releases checked against the overlay"
    if dist == "vllm" and not installed["runner_file"]:
        return SourceVerdict(f"{head}, and {v2_only_message()}")
    why = compare(dist, installed, store)
    if why is not None:
        return SourceVerdict(f"{head}: {why}; the overlay steps aside until it is checked (tools/overlay_matrix.py)")
    same = [v for v, fp in store.items() if fp["replaced"] == installed["replaced"]]
    match = max(same, key=version_key) if same else max(store, key=version_key)
    names = ", ".join(installed["replaced"])
    seams = ", ".join(k for k, v in installed["wrapped"].items() if v is not None)
    return SourceVerdict(None, f"{head}; its {names} is identical to {dist} {match}'s and its seams ({seams}) pass "
                               f"the version matrix's checks, so the overlay applies")
