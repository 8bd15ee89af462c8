"""Rich tables and the verdict line of a verify result (the same dict the JSON carries)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

_STATUS = {"ok": "[green]ok[/]", "differs": "[red]differs[/]", "info": "info", "not_run": "[dim]not run[/]"}


def _st(s: str) -> str:
    return _STATUS.get(s, s)


def render(result: dict, console: Console) -> None:
    """Print the checks table, the distribution tests, constraints per side, accuracy, and the verdict."""
    c = result.get("checks") or {}
    spec = result["spec"]
    t = Table(title="expo-prof verify: overlay off vs on", title_justify="left")
    t.add_column("check")
    t.add_column("status")
    t.add_column("detail")
    g = c.get("greedy") or {}
    t.add_row("greedy (temperature 0)", _st(g.get("status", "not_run")),
              f"{g.get('identical', 0)}/{g.get('compared', 0)} requests identical token ids (alone and in mixed batches)")
    sd = c.get("seeded") or {}
    if sd.get("status") != "not_run" and sd:
        t.add_row("seeded", _st(sd["status"]),
                  f"repeatable on: {sd['repeatable_on']}, off: {sd['repeatable_off']}; equal on/off: {sd['equal_on_off']}"
                  f"{'' if sd['on_off_judged'] else ' (not judged)'} — {escape(sd['guarantee'])}")
    else:
        t.add_row("seeded", _st("not_run"), "")
    d = c.get("distribution") or {}
    if d.get("tests"):
        t.add_row("sampling distribution", _st(d["status"]),
                  f"{len(d['tests'])} two-sample tests, smallest p {d['min_p']:.3g} (per-test level {d['per_test_alpha']:.2g}); "
                  f"would detect total variation ≥ {d['detectable_tv']:.3f} with power {d['power']:.0%}")
    else:
        t.add_row("sampling distribution", _st("not_run"), "")
    for label in ("on", "off"):
        con = (c.get("constraints") or {}).get(label) or {}
        if con.get("per_config"):
            n_out = sum(r["outside_allowed_first"] for r in con["per_config"])
            n_mask = sum(r["masked_tokens_sampled"] for r in con["per_config"])
            how = "processed logprobs" if con.get("processed_logprobs") else \
                "no processed logprobs (start vLLM with --logprobs-mode processed_logprobs for every position)"
            t.add_row(f"constraints (overlay {label})", _st(con["status"]),
                      f"{n_out} first tokens outside top-k/top-p/min-p, {n_mask} masked tokens sampled; {how}")
        san = (c.get("sanity") or {}).get(label) or {}
        if san:
            vocab = san.get("vocab_size")
            t.add_row(f"vocab / NaN (overlay {label})", _st(san["status"]),
                      f"{san['tokens']} token ids, {san['out_of_vocab_count']} outside "
                      f"{'vocab ' + str(vocab) if vocab else '(vocab size unknown: --vocab-size)'}; "
                      f"{san['nonfinite_logprobs']} NaN/inf of {san['logprobs']} logprobs")
    acc = result.get("accuracy")
    if acc and acc.get("status") != "not_run":
        need = acc["runs_needed_per_side"]
        need_s = f"{need}" if need is not None else (f"more than {acc['runs_needed_max']}" if acc["diff"] else "—")
        t.add_row("accuracy (your set)", _st(acc["status"]),
                  f"{acc['accuracy_off']:.2%} → {acc['accuracy_on']:.2%} on {acc['n']} prompts: "
                  f"{acc['diff']:+.2%}, {acc['confidence']:.0%} CI [{acc['ci_low']:+.2%}, {acc['ci_high']:+.2%}]; "
                  f"runs of the set per side to settle it: {need_s}")
    console.print(t)
    if d.get("tests"):
        dt = Table(title="sampling distribution per setting and position", title_justify="left")
        for col in ("setting", "pos", "test", "n off/on", "bins", "p", "TV seen", "TV detectable"):
            dt.add_column(col, justify="left" if col in ("setting", "test") else "right")
        for x in d["tests"]:
            p = f"[red]{x['p']:.3g}[/]" if x["significant"] else f"{x['p']:.3g}"
            dt.add_row(escape(x["config"]), str(x["position"]), x["method"], f"{x['n_off']}/{x['n_on']}",
                       str(x["bins"]), p, f"{x['tv_observed']:.3f}", f"{x['detectable_tv']:.3f}")
        console.print(dt)
    for n in result.get("notes") or []:
        console.print(f"[yellow]note:[/] {escape(n)}")
    v: dict = result.get("verdict") or {}
    colour = {"equivalent": "green", "differs": "red"}.get(v.get("verdict", ""), "red")
    console.print(f"[bold {colour}]verdict:[/] {escape(v.get('line', ''))}")
    if spec and result.get("session_dir"):
        console.print(f"[dim]kept: {escape(result['session_dir'])}/verify.json[/]")
