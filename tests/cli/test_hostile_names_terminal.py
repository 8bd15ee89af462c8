"""Hostile names on the terminal (issue 27): markup escaped, control and bidi characters shown as ``\\uXXXX``.

GIVEN the GENERATED run of tests/support/hostile_names.py (ops renamed to an ESC sequence, a right-to-left
override, markup, a 1 MiB name) and A/B tables whose run labels hold the same WHEN the real CLI prints tables,
warnings and flags THEN no ESC, override or isolate reaches the terminal raw (a name can neither recolour or
clear the screen nor reorder a line), and the names read as ``\\u001b[31m…``.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys

from support.hostile_names import OP, hostile_run

RAW = ("\x1b", "\u202e", "\u2067", "\x07")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def test_trace_names_and_file_names_reach_the_terminal_neutralised(tmp_path):
    """GIVEN the hostile run, plus an overlay log named with a clear-screen sequence that holds garbage WHEN
    analysed with --op ^EVIL THEN the Found table shows the ESC name as \\u001b[31mred\\u001b[0m, the warning
    names the file as …\\u001b[2J…, and neither output holds a raw control or bidi character (before: both
    raw: the name turned the rest of the table red, the file name cleared the screen)."""
    run = hostile_run(tmp_path / "run")
    (run / "overlay" / "expo-prof-events-\x1b[2J\x07.jsonl").write_bytes(b"\x00junk\n")
    proc = cli("analyze", str(run), "--op", OP)
    assert proc.returncode == 0, proc.stderr
    assert not any(c in proc.stdout + proc.stderr for c in RAW)
    assert "EVIL \\u001b[31mred\\u001b[0m ×396" in proc.stdout
    assert "expo-prof-events-\\u001b[2J\\u0007.jsonl: not an overlay event log" in proc.stderr


def test_run_labels_of_a_table_reach_the_terminal_neutralised(tmp_path):
    """GIVEN an A/B table whose outlier run (150 among ~100) is labelled with an ESC sequence and a right-to-left
    override WHEN compared THEN the flag line names it as \\u001b[2Jboom\\u202e and no raw control or bidi
    character is printed (before: printed raw)."""
    label = "\x1b[2Jboom\u202e"
    a, b = tmp_path / "off.csv", tmp_path / "on.csv"
    for path, vals in ((a, [100.0, 100.5, 99.8, 100.2, 150.0]), (b, [101.0, 101.4, 100.9, 101.2, 101.1])):
        with open(path, "w", newline="") as f:
            rows = [[label if v == 150.0 else f"r{i}", v] for i, v in enumerate(vals)]
            csv.writer(f).writerows([["run", "output_throughput"], *rows])
    proc = cli("compare", str(a), str(b))
    assert proc.returncode == 0, proc.stderr
    assert not any(c in proc.stdout + proc.stderr for c in RAW)
    assert "\\u001b[2Jboom\\u202e" in proc.stdout
