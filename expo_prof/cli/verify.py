"""``expo-prof verify -- CMD…`` / ``verify --off-url URL --on-url URL``: does the overlay change what the model says?"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from expo_prof.cli.base import command as cli_command
from expo_prof.errors import BadInput, ExpoProfError, EXIT_RUN_FAILED


@cli_command(
    "verify",
    summary="Prove on your own model and server that the overlay leaves the outputs alone (greedy, seeded, "
            "distributions, constraints).",
    examples=[
        "expo-prof verify -- vllm serve Qwen/Qwen3-32B --port 8000",
        "expo-prof verify --off-url http://127.0.0.1:8000 --on-url http://127.0.0.1:8001",
        "expo-prof verify --samples 4000 --accuracy my_set.jsonl --json -- vllm serve MODEL",
    ],
    context_settings={"ignore_unknown_options": False},
)
@click.option("--off-url", metavar="URL", default=None, help="A server you run with the overlay OFF (instead of CMD).")
@click.option("--on-url", metavar="URL", default=None, help="A server you run with the overlay ON (instead of CMD).")
@click.option("--samples", type=int, default=2000, show_default=True,
              help="Samples per sampling setting and side (the distribution tests' size).")
@click.option("--positions", type=int, default=2, show_default=True, help="First generated positions tested.")
@click.option("--per-request", type=int, default=50, show_default=True, help="Samples per request (OpenAI `n`).")
@click.option("--greedy-tokens", type=int, default=16, show_default=True, help="Tokens per greedy and seeded request.")
@click.option("--prompt", "prompts", multiple=True, metavar="TEXT",
              help="Prompts of the greedy/seeded requests (repeatable; the first one is also sampled).")
@click.option("--seed", type=int, default=1234, show_default=True, help="Seed of the seeded requests.")
@click.option("--concurrency", type=int, default=4, show_default=True, help="Requests in flight at once.")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="Family-wise level of the distribution tests (Bonferroni) and the accuracy CI.")
@click.option("--power", type=float, default=0.8, show_default=True, help="Power at which the detectable difference is stated.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "npu"]), default="auto", show_default=True,
              help="Lane kind of the server (seeded on/off equality is judged on cuda/npu). auto: from the installed "
                   "packages with CMD, unknown with URLs.")
@click.option("--vocab-size", type=int, default=None,
              help="Vocabulary size for the out-of-vocabulary check (default: the model directory's config.json).")
@click.option("--accuracy", "accuracy_file", type=click.Path(path_type=Path), default=None, metavar="FILE.jsonl",
              help="Your own accuracy set: JSON lines with 'prompt' and 'reference', scored off and on (greedy).")
@click.option("--accuracy-max-tokens", type=int, default=64, show_default=True, help="Tokens per accuracy answer.")
@click.option("--request-timeout", type=float, default=300.0, show_default=True, help="Seconds per request.")
@click.option("--ready-timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for /health (CMD).")
@click.option("--session-dir", "--out", "out", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Where the runs and verify.json go (new or empty; default: traces/<UTC stamp>-verify).")
@click.option("--traces-dir", type=click.Path(path_type=Path), default=Path("traces"), show_default=True,
              metavar="DIR", help="Where new session directories go.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout (docs/json-output.md) instead of tables.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Also write the JSON result to FILE.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def command(settings, off_url, on_url, samples, positions, per_request, greedy_tokens, prompts, seed, concurrency,
            alpha, power, device, vocab_size, accuracy_file, accuracy_max_tokens, request_timeout, ready_timeout,
            out, traces_dir, as_json, output, cmd) -> int:
    """Run the same fixed request set with the overlay off and on and check that the outputs agree:
    greedy token ids identical; seeded requests repeatable; sampled token distributions equal per
    first position (two-sample tests with p-values and the smallest difference the run could see);
    every sampled token inside top-k / top-p / min-p; no token id outside the vocabulary and no
    NaN/inf logprob; optionally your own accuracy set with a confidence interval.

    With CMD the server is launched twice as by `record` (overlay off, then on; the command gets
    `--logprobs-mode processed_logprobs` when it is `vllm serve` or the API server and does not set it).
    Exit codes: 0 no difference at the stated power, 1 a difference found, 2 bad input,
    3 the run failed (a server unreachable or dying; what was collected is kept).
    """
    from expo_prof.console import console, err_console
    from expo_prof.verify import accuracy as acc_mod
    from expo_prof.verify import run as vrun
    from expo_prof.serving.client import check_url
    from expo_prof.verify.spec import DEFAULT_PROMPTS, VerifySpec

    argv = list(cmd)
    urls = (off_url, on_url)
    if any(urls) and not all(urls):
        raise BadInput("give both --off-url and --on-url (or a command after --)")
    if all(urls) and argv:
        raise BadInput("give either a command after -- or --off-url/--on-url, not both")
    if not all(urls) and not argv:
        raise BadInput("nothing to verify: give a command (`expo-prof verify -- vllm serve MODEL`) "
                       "or --off-url URL --on-url URL")
    for name, v, lo in (("samples", samples, 2), ("positions", positions, 1), ("per-request", per_request, 1),
                        ("greedy-tokens", greedy_tokens, 1), ("concurrency", concurrency, 1),
                        ("accuracy-max-tokens", accuracy_max_tokens, 1)):
        if v < lo:
            raise BadInput(f"--{name} must be at least {lo}")
    for name, v in (("alpha", alpha), ("power", power)):
        if not 0 < v < 1:
            raise BadInput(f"--{name} must lie between 0 and 1")
    if vocab_size is not None and vocab_size < 1:
        raise BadInput("--vocab-size must be positive")
    items = acc_mod.load(accuracy_file) if accuracy_file is not None else None
    if output is not None:
        from expo_prof.output import VERIFY_JSON, check_target

        check_target(output, [accuracy_file] if accuracy_file else [], VERIFY_JSON)
    notes = []
    if argv:
        from expo_prof.record.command import parse_target

        target = parse_target(argv)  # a bad command fails before any directory is created
        if not any(a == "--logprobs-mode" or a.startswith("--logprobs-mode=") for a in argv):
            if target.kind in ("vllm-serve", "api-server"):
                argv += ["--logprobs-mode", vrun.LOGPROBS_MODE]
                notes.append(f"added --logprobs-mode {vrun.LOGPROBS_MODE} to the command (constraint checks on every position)")
            else:
                notes.append(f"a launch script: add --logprobs-mode {vrun.LOGPROBS_MODE} to its vLLM for the "
                             "constraint checks past position 1")
    else:
        off_url, on_url = check_url(off_url, "--off-url"), check_url(on_url, "--on-url")
        _reachable(off_url, "--off-url")
        _reachable(on_url, "--on-url")
    spec = VerifySpec(prompts=tuple(prompts) or DEFAULT_PROMPTS, greedy_tokens=greedy_tokens, seed=seed,
                      samples=samples, positions=positions, per_request=per_request, concurrency=concurrency,
                      alpha=alpha, power=power, timeout_s=request_timeout, vocab_size=vocab_size, configs_note=notes)
    dev = device if device != "auto" else ("auto" if argv else "unknown")
    result = vrun.new_result(spec, "command" if argv else "urls", dev, accuracy_file)
    quiet = bool(getattr(settings, "quiet", False))

    def progress(msg: str) -> None:
        if not quiet:
            err_console.print(f"[dim]verify:[/] {msg}")

    from expo_prof.runs.layout import claim_out_dir, new_dir, short_name

    saved = console.file
    console.file = sys.stderr  # stdout carries only the result (tables or JSON); launching talks on stderr
    try:
        if argv:
            top = claim_out_dir(out) if out is not None else new_dir(traces_dir, "verify-" + short_name(argv))
            code = vrun.run_command(argv, spec, result, items, accuracy_max_tokens, top, ready_timeout, quiet, progress)
        else:
            top = claim_out_dir(out) if out is not None else new_dir(traces_dir, "verify-urls")
            result["session_dir"] = str(top)
            code = vrun.run_urls(off_url, on_url, spec, result, items, accuracy_max_tokens, top, progress)
    finally:
        console.file = saved
    if output is not None:
        from expo_prof.output import write

        write(output, vrun.dumps(result))
    if as_json:
        click.echo(vrun.dumps(result))
    else:
        from expo_prof.verify.tables import render

        render(result, console)
    if result["error"]:
        err_console.print(f"[red]error:[/] {result['error'].splitlines()[0]}")
    return code


def _reachable(url: str, option: str) -> None:
    """One line and exit 3 when nothing answers at ``url`` (before any directory is created)."""
    from expo_prof.serving.client import LIST_TIMEOUT_S, MODELS, Client, ServerError

    try:
        status, _ = Client(url).call("GET", MODELS, timeout=LIST_TIMEOUT_S)
    except ServerError as exc:
        raise ExpoProfError(f"{option} {url}: nothing answers there ({exc.reason})", EXIT_RUN_FAILED) from None
    if status != 200:
        raise ExpoProfError(f"{option} {url}: {MODELS} answered HTTP {status}; is it a vLLM OpenAI server?",
                            EXIT_RUN_FAILED)
