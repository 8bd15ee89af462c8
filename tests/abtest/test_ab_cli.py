"""`expo-prof ab` refuses bad arguments with one clear line, before starting or creating anything.

GIVEN an ab invocation with a bad command or option WHEN it runs THEN exit 2,
one error line, no traceback, and no session directory.
"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--", "no-such-vllm-binary", "serve", "x"], "command not found: no-such-vllm-binary"),
        (["--repeat", "0", "--", "python", "-m", "vllm.entrypoints.openai.api_server"], "--repeat must be at least 1"),
        (["--no-load", "--", "python", "-m", "vllm.entrypoints.openai.api_server"], "--no-load"),
        (["--num-prompts", "0", "--", "python", "-m", "vllm.entrypoints.openai.api_server"], "--num-prompts must be at least 1"),
        (["--switchback", "--paired", "--", "python", "-m", "vllm.entrypoints.openai.api_server"],
         "--switchback cannot be combined with --paired"),
        (["--repeat", "3", "--budget", "20 launches", "--", "python", "-m", "vllm.entrypoints.openai.api_server"],
         "--repeat N (or --fixed-length) fixes their number instead"),
        (["--margin", "20us", "--", "python", "-m", "vllm.entrypoints.openai.api_server"],
         "across launches the margin is a share of output tok/s"),
        (["--budget", "4 launches", "--", "python", "-m", "vllm.entrypoints.openai.api_server"],
         "at least 12 launches"),
        (["--switchback", "--block-steps", "1", "--", "python", "-m", "vllm.entrypoints.openai.api_server"],
         "--block-steps must be at least 2"),
        (["--block-steps", "4", "--", "python", "-m", "vllm.entrypoints.openai.api_server"],
         "--block-steps only applies with --switchback"),
    ],
)
def test_bad_ab_invocations(tmp_path, cli, args, needle):
    proc = cli("ab", "--traces-dir", str(tmp_path / "traces"), *args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "traces").exists()
