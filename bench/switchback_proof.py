"""Switchback against `ab` on the real vLLM CPU server: the two configurations and how each is measured.

Shared by ``bench/bench_switchback.py`` (the table in the README) and
``tests/e2e/test_switchback_vs_ab.py`` (the proof in CI), so both measure the
same thing. Two configurations whose true effects have opposite signs:

* ``lane-free-fp64`` — vLLM's fp64-Gumbel path (``--use-fp64-gumbel``: vLLM
  draws ``q`` inline on the model's core) with the lane on the core vLLM
  leaves free (``EXPO_PROF_LANE_CPUS=auto``): the overlay takes the draw off
  the critical path — it should **win**;
* ``lane-shared-default`` — vLLM CPU's default fused Gumbel-argmax op with the
  lane forced onto the model's own core (``EXPO_PROF_LANE_CPUS`` = the core
  the forward is bound to): the draw only time-slices with the forward, and
  the overlay's native path costs more than the fused op — it should **lose**.

The model is a tiny random-weight Llama (hidden 512, 2 layers) with a
65,536-token vocabulary (built offline, ``pad_vocab``), serving 4 requests at
once: ``q`` is 4 × 65,536 per step, ~5 ms to draw on one core, well under the
forward and the logits (~15 ms: the LM head's 33M weights stream from memory
whatever the batch), so on a free core the draw hides with room to spare —
draw and forward of the same order, as on a real accelerator. Few requests
keep the API server's own work (detokenising, streaming) light on the core
the lane shares with it. Both effects are large (about +23 % and −14 % output
tok/s on this project's 2-core machine) so that `ab`'s few runs see their sign.

Each configuration is measured by ``expo-prof ab --repeat N`` (2·N server
launches) and by ``expo-prof ab --switchback`` (one launch), with the same
built-in workload; :func:`measure` returns both estimates of the output tok/s
change and the wall time of each method.

Run as a script (``make proof``, with nothing else on the machine) it is the
proof itself: both configurations, ``ab --repeat 3`` and one switchback run
each, written as a dated record (:data:`RECORD`, its table also in docs/ab.md)
with the commit and a content hash of :data:`PROOF_FILES`, the code the
estimates depend on. ``tests/bench/test_switchback_proof_record.py`` (in
``make test``) recomputes the hash and fails, naming ``make proof``, when that
code changed since the record or when the record says the methods disagreed
(:func:`staleness`).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The committed record of the last proof (``make proof``).
RECORD = Path("bench/results/switchback_proof.json")
#: The one list of the code the two estimates depend on: a change to any of these files makes the record stale.
PROOF_FILES: tuple[str, ...] = (
    "expo_prof/analysis/saving/switchback.py",  # the switchback estimator
    "expo_prof/analysis/saving/recording.py",  # which steps of each log it is given (the measured load's window)
    "expo_prof/analysis/steps/facts.py",  # each step's cadence and the idle-gap rule the estimator compares by
    "overlay/switch.py",  # the overlay's switch (off / on / switchback blocks)
    "overlay/sampler.py",  # the overlay's entry points (the sampler hook, call nesting)
    "overlay/arms.py",  # the block order (switchback_phase, ArmSchedule)
    "overlay/draws.py",  # the on path: q launched beside the forward and handed to the sampler
    "overlay/samplercalls.py",  # which path each sampler call takes (native / inline / the overlay's q)
    "overlay/lanes.py",  # the lane that draws q beside the forward
    "expo_prof/cli/ab.py",  # ab: --repeat / --switchback
    "expo_prof/record/session.py",  # ab's runner: the alternating session of runs
    "expo_prof/abtest/judging/judge.py",  # ab's judge: the change, its CI, the tests
    "expo_prof/abtest/judging/verdict.py",  # the decision from them
    "bench/switchback_proof.py",  # the configurations, the workload, how each is measured
)
#: docs/ab.md holds the record's table between these two lines (written by ``make proof``).
DOC, DOC_BEGIN, DOC_END = Path("docs/ab.md"), "<!-- switchback-proof: begin -->", "<!-- switchback-proof: end -->"
#: ``ab --repeat`` of a proof (2·N launches per configuration); a record made with fewer is not a proof.
PROOF_REPEAT = 3

#: The forward's core (vLLM binds its OpenMP threads here) and what the lane may use.
MODEL_CPU = "0"
CONFIGS: dict[str, dict] = {
    "lane-free-fp64": {
        "env": {"VLLM_CPU_OMP_THREADS_BIND": MODEL_CPU, "EXPO_PROF_LANE_CPUS": "auto"},
        "args": ["--use-fp64-gumbel"],
        "expect": +1,
        "what": "fp64-Gumbel path, lane on the free core",
    },
    "lane-shared-default": {
        "env": {"VLLM_CPU_OMP_THREADS_BIND": MODEL_CPU, "EXPO_PROF_LANE_CPUS": MODEL_CPU},
        "args": [],
        "expect": -1,
        "what": "default fused path, lane on the model's core",
    },
}
#: The tiny model: 64k vocabulary (the draw is rows × vocab), head_dim 64, an LM head of 33M weights.
MODEL = {"hidden": 512, "heads": 8, "layers": 2, "pad_vocab": 65536}
#: The built-in load of every run: 4 requests decoding 200 tokens (max-model-len 256).
WORKLOAD = ["--num-prompts", "4", "--input-len", "32", "--output-len", "200", "--warmup", "1"]
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


@dataclass
class Measured:
    """One configuration measured both ways."""

    config: str
    ab: dict  # compare --json of the ab session
    switchback: dict  # compare --json of the switchback run
    ab_wall_s: float
    switchback_wall_s: float
    ab_dir: Path
    switchback_dir: Path
    logs: list[str] = field(default_factory=list)
    ab_machine: dict = field(default_factory=dict)  # what else the machine did during ab (see _cli)
    switchback_machine: dict = field(default_factory=dict)

    @property
    def ab_tput(self) -> dict:
        """ab's output_throughput metric (change_pct, ci_pct, values …)."""
        return {m["name"]: m for m in self.ab["metrics"]}["output_throughput"]

    @property
    def saving(self) -> dict:
        """The switchback Saving of rank 0."""
        return self.switchback["savings"][0]


def model_dir() -> Path:
    """The tiny large-vocabulary model (built once, cached in .cache/tiny-llama)."""
    sys.path.insert(0, str(REPO))
    from expo_prof.serving.tinymodel import build_tiny_llama

    return build_tiny_llama(**MODEL)


def _server(model: Path, port: int, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--dtype", "float32",
            "--max-model-len", "256", "--port", str(port), "--enforce-eager", "--shutdown-timeout", "10", *args]


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, steal) jiffies of the whole machine from /proc/stat's ``cpu`` line; None off Linux."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal …: busy excludes idle and iowait; steal is time the
    # hypervisor gave this VM's cores to someone else (a neighbour the proof cannot see in its own process list)
    return f[0] + f[1] + f[2] + f[5] + f[6], f[7] if len(f) > 7 else 0


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cli(args: list[str], env: dict, cwd: Path, timeout: float) -> tuple[subprocess.CompletedProcess, float, dict]:
    """Run the CLI; also what else the machine did meanwhile (``foreign_cpu_s``: busy CPU time not spent by
    this command and its children — the servers are its children — and ``steal_s``)."""
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    j0, c0, t0 = _cpu_jiffies(), _children_cpu_s(), time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "expo_prof", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    wall, j1 = time.monotonic() - t0, _cpu_jiffies()
    machine: dict = {}
    if j0 is not None and j1 is not None:
        own = _children_cpu_s() - c0
        machine = {"busy_cpu_s": round((j1[0] - j0[0]) / hz, 1), "own_cpu_s": round(own, 1),
                   "foreign_cpu_s": round(max(0.0, (j1[0] - j0[0]) / hz - own), 1),
                   "steal_s": round((j1[1] - j0[1]) / hz, 1)}
    return proc, wall, machine


def measure(config: str, work: Path, *, repeat: int = 3, block_steps: int = 8, timeout: float = 1800.0,
            model: Path | None = None) -> Measured:
    """Run ``ab --repeat`` and ``ab --switchback`` for ``config`` under ``work``; RuntimeError when one fails."""
    from expo_prof.serving.launch import free_port

    c = CONFIGS[config]
    model = model or model_dir()
    env = {**os.environ, **ENV, **c["env"], "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    for name in ("EXPO_PROF_ASYNC_EXPONENTIAL", "VLLM_ASCEND_ENABLE_ASYNC_EXPONENTIAL"):
        env.pop(name, None)
    work.mkdir(parents=True, exist_ok=True)
    ab_dir, sb_dir = work / f"{config}-ab", work / f"{config}-switchback"
    ab, ab_s, ab_m = _cli(["-q", "ab", "--repeat", str(repeat), *WORKLOAD, "--session-dir", str(ab_dir), "--json",
                     "--", *_server(model, free_port(), c["args"])], env, work, timeout)
    if ab.returncode != 0:
        raise RuntimeError(f"{config}: ab failed ({ab.returncode}): {ab.stderr[-2000:]}")
    # --fixed-length: the proof compares the two estimators on the same workload; the sequential run's error under
    # peeking is bench/sim_sequential.py's subject.
    sb, sb_s, sb_m = _cli(["-q", "ab", "--switchback", "--fixed-length", "--block-steps", str(block_steps), *WORKLOAD,
                           "--session-dir", str(sb_dir), "--json", "--", *_server(model, free_port(), c["args"])],
                          env, work, timeout)
    if sb.returncode != 0:
        raise RuntimeError(f"{config}: ab --switchback failed ({sb.returncode}): {sb.stderr[-2000:]}")
    return Measured(config, json.loads(ab.stdout), json.loads(sb.stdout), ab_s, sb_s, ab_dir, sb_dir,
                    [ab.stderr, sb.stderr], ab_m, sb_m)


def inside(x: float, ci: list[float]) -> bool:
    """``x`` within the closed interval ``ci``."""
    return min(ci) <= x <= max(ci)


def code_hash(repo: Path = REPO) -> str:
    """sha256 over :data:`PROOF_FILES` (each file's path and bytes, in the listed order)."""
    h = hashlib.sha256()
    for rel in PROOF_FILES:
        data = (repo / rel).read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def agree(t: dict, s: dict) -> bool:
    """Switchback's tok/s change has the sign of ab's and lies inside ab's 95 % CI."""
    return (t["change_pct"] * s["tokps_change_pct"] > 0 and t["ci_pct"] is not None
            and inside(s["tokps_change_pct"], t["ci_pct"]))


def row(m: Measured) -> dict:
    """One configuration's line of the record."""
    t, s = m.ab_tput, m.saving
    c = CONFIGS[m.config]
    return {"config": m.config, "what": c["what"], "expect": c["expect"],
            # each run's output tok/s in launch order (off, on, off, on …), so a disagreement can be traced to a run
            "ab": {"change_pct": t["change_pct"], "ci_pct": t["ci_pct"], "decision": m.ab["verdict"]["decision"],
                   "wall_s": round(m.ab_wall_s, 1), "off_tokps": t["a"]["values"], "on_tokps": t["b"]["values"],
                   "machine": m.ab_machine},
            "switchback": {"change_pct": s["tokps_change_pct"], "ci_pct": s["tokps_ci_pct"],
                           "decision": s["decision"], "wall_s": round(m.switchback_wall_s, 1),
                           "machine": m.switchback_machine},
            "ab_sees_expected_sign": bool(t["change_pct"] * c["expect"] > 0),
            "agree": agree(t, s)}


def staleness(record: dict, repo: Path = REPO) -> list[str]:
    """Why ``record`` no longer proves anything about the code in ``repo`` (empty: it is current and agrees)."""
    fix = "run `make proof` (nothing else on the machine) and commit bench/results/switchback_proof.json"
    problems = []
    if record.get("code_hash") != code_hash(repo):
        problems.append(f"the code the proof depends on changed since it was recorded "
                        f"({record.get('commit', '?')[:12]}, {record.get('date', '?')}): {fix}")
    rows = {r.get("config"): r for r in record.get("rows", [])}
    if set(rows) != set(CONFIGS) or record.get("repeat", 0) < PROOF_REPEAT:
        problems.append(f"the record is not a whole proof (configurations {sorted(rows)}, ab --repeat "
                        f"{record.get('repeat')}; needs {sorted(CONFIGS)} at --repeat {PROOF_REPEAT}): {fix}")
    for name, r in sorted(rows.items()):
        if not (r.get("agree") and r.get("ab_sees_expected_sign")):
            problems.append(f"{name}: the record says switchback and ab disagreed (or ab missed the expected "
                            f"sign); find out why, then {fix}")
    return problems


def _ci(ci: list[float] | None) -> str:
    return "–" if ci is None else f"[{ci[0]:+.1f}, {ci[1]:+.1f}]"


def table(record: dict) -> str:
    """The record as the Markdown table docs/ab.md shows."""
    lines = [f"Recorded {record['date']} at commit {record['commit'][:12]} (code hash {record['code_hash'][:12]}), "
             f"`ab --repeat {record['repeat']}` vs one `ab --switchback` run (blocks of {record['block_steps']} "
             "steps); output tok/s change with its 95 % CI:", "",
             "| configuration | expected | ab change | ab 95% CI | switchback change | switchback 95% CI | agree "
             "| ab wall s | switchback wall s | other CPU s (ab / switchback) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["rows"]:
        a, s = r["ab"], r["switchback"]
        lines.append(f"| {r['config']} ({r['what']}) | {'wins' if r['expect'] > 0 else 'loses'} | "
                     f"{a['change_pct']:+.1f}% | {_ci(a['ci_pct'])} | {s['change_pct']:+.1f}% | {_ci(s['ci_pct'])} | "
                     f"{'yes' if r['agree'] else 'NO'} | {a['wall_s']:.0f} | {s['wall_s']:.0f} | "
                     f"{_other(a)} / {_other(s)} |")
    lines += ["", "*Other CPU s*: busy CPU time on the machine during that measurement not spent by the "
              "measurement's own processes (plus hypervisor steal): near 0 on a quiet machine."]
    return "\n".join(lines) + "\n"


def _other(method: dict) -> str:
    m = method.get("machine") or {}
    if "foreign_cpu_s" not in m:
        return "–"  # a record made before the proof measured it
    return f"{m['foreign_cpu_s'] + m.get('steal_s', 0.0):.0f}"


def doc_table(repo: Path = REPO) -> str:
    """The table docs/ab.md shows now (between :data:`DOC_BEGIN` and :data:`DOC_END`)."""
    text = (repo / DOC).read_text(encoding="utf-8")
    return text.split(DOC_BEGIN, 1)[1].split(DOC_END, 1)[0].strip("\n") + "\n"


def write_doc_table(record: dict, repo: Path = REPO) -> None:
    """Put the record's table into docs/ab.md."""
    text = (repo / DOC).read_text(encoding="utf-8")
    head, rest = text.split(DOC_BEGIN, 1)
    (repo / DOC).write_text(f"{head}{DOC_BEGIN}\n{table(record)}{DOC_END}{rest.split(DOC_END, 1)[1]}",
                            encoding="utf-8")


def _commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", *PROOF_FILES], cwd=REPO, capture_output=True,
                           text=True, check=False).stdout.strip()
    return (proc.stdout.strip() or "unknown") + ("+uncommitted" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    """``make proof``: measure both configurations both ways and write the record (exit 1 when they disagree)."""
    ap = argparse.ArgumentParser(description="The switchback-vs-ab proof (make proof); writes its dated record.")
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--repeat", type=int, default=PROOF_REPEAT, help="ab runs per side (a proof needs 3)")
    ap.add_argument("--block-steps", type=int, default=8)
    ap.add_argument("-o", "--out", type=Path, default=REPO / RECORD, help="the record (default: %(default)s)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the runs under this folder")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    if load0 > 0.5:  # the effects are CPU contention on purpose: other work on the machine moves both estimates
        print(f"warning: load average {load0:.2f} at the start; the proof wants nothing else on the machine",
              file=sys.stderr)
    model = model_dir()
    rows = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="switchback-proof-") as tmp:
        for name in args.configs:
            try:
                m = measure(name, args.keep or Path(tmp), repeat=args.repeat, block_steps=args.block_steps,
                            model=model)
            except RuntimeError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            rows.append(row(m))
            print(f"{name}: ab {m.ab_wall_s:.0f} s, switchback {m.switchback_wall_s:.0f} s", file=sys.stderr)
    record = {"schema": "expo-prof.switchback-proof/1",
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "commit": _commit(), "code_hash": code_hash(), "files": list(PROOF_FILES), "repeat": args.repeat,
              "block_steps": args.block_steps, "wall_s": round(time.monotonic() - t0, 1),
              "machine": {"cpus": os.cpu_count(), "load_avg_at_start": round(load0, 2),
                          "load_avg_at_end": round(os.getloadavg()[0], 2)}, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(table(record))
    if args.out.resolve() == (REPO / RECORD).resolve():
        write_doc_table(record)
    print(f"record written to {args.out}", file=sys.stderr)
    problems = staleness(record)
    for p in problems:
        print(f"proof: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
