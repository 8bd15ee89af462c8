"""`expo-prof compare` takes each side from what the runs record, not from the argument order (docs/ab.md,
"Which side is which").

Real data: traces/samples/tiny-cpu-off-on holds an overlay-off run (01-off) and an overlay-on run (02-on)
of vLLM's CPU server, recorded by `expo-prof record`. Odd manifests (no overlay state, a switchback run,
a side mixing off and on) are small run directories written by the test. Every test runs the real CLI in a
subprocess: GIVEN inputs WHEN compare runs THEN the sides follow the manifests, or exit 2 with one line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ab_helpers import metric, ok_json, one_clear_line, run_dir, session_dir, write_csv  # type: ignore[import]
from shared_paths import REPO  # type: ignore[import-not-found]

SAMPLE = REPO / "traces" / "samples" / "tiny-cpu-off-on"
OFF, ON = SAMPLE / "01-off", SAMPLE / "02-on"


def _set_overlay(run: Path, value, *, drop: bool = False) -> Path:
    """Rewrite a run directory's manifest "overlay" (or drop the key), as an old or foreign recorder left it."""
    m = json.loads((run / "manifest.json").read_text())
    if drop:
        del m["overlay"]
    else:
        m["overlay"] = value
    (run / "manifest.json").write_text(json.dumps(m))
    return run


def test_swapped_arguments_give_the_numbers_of_the_right_order_and_say_so(tmp_path, cli):
    # GIVEN the real off and on runs, given the wrong way round (the on run as A)
    right = ok_json(cli("compare", str(OFF), str(ON), "--json"))
    # WHEN compared
    swapped = ok_json(cli("compare", str(ON), str(OFF), "--json"))
    # THEN the sides follow the manifests: off = 01-off, on = 02-on, every number as in the right order
    assert swapped["a"]["runs"] == ["01-off"] and swapped["b"]["runs"] == ["02-on"]
    assert (swapped["a"]["overlay"], swapped["b"]["overlay"]) == ("off", "on")
    assert swapped["a"]["sources"] == [str(OFF)] and swapped["b"]["sources"] == [str(ON)]
    assert swapped["metrics"] == right["metrics"] and swapped["mechanism"] == right["mechanism"]
    # AND the on run's lower throughput is a drop (the sign the wrong order inverted)
    assert metric(swapped, "output_throughput")["change_pct"] < 0
    assert swapped["verdict"] == right["verdict"]
    # AND one note says what was swapped; the right order has none
    assert swapped["reordered"].startswith("sides swapped to follow the run manifests")
    assert str(OFF) in swapped["reordered"] and "\n" not in swapped["reordered"]
    assert right["reordered"] is None
    # AND the tables show the note under the header
    table = cli("compare", str(ON), str(OFF))
    assert table.returncode == 0, table.stderr
    assert "note: sides swapped to follow the run manifests" in table.stdout
    # AND so does the page
    page = tmp_path / "ab.html"
    assert cli("compare", str(ON), str(OFF), "--format", "html", "-o", str(page)).returncode == 0
    assert "sides swapped to follow the run manifests" in page.read_text()


def test_labels_name_the_sides_after_the_swap(cli):
    # GIVEN the runs the wrong way round with names for baseline and candidate
    out = ok_json(cli("compare", str(ON), str(OFF), "--labels", "base,new", "--json"))
    # THEN the first name goes to the off runs (side A), the second to the on runs
    assert (out["a"]["name"], out["a"]["runs"]) == ("base", ["01-off"])
    assert (out["b"]["name"], out["b"]["runs"]) == ("new", ["02-on"])
    # AND GIVEN the names off/on in the order of the (wrong) arguments THEN the side named off holds the off run
    out = ok_json(cli("compare", str(ON), str(OFF), "--labels", "on,off", "--json"))
    assert (out["a"]["name"], out["a"]["runs"]) == ("off", ["01-off"])
    assert (out["b"]["name"], out["b"]["runs"]) == ("on", ["02-on"])
    assert "--labels on,off swapped" in out["reordered"]


@pytest.mark.parametrize("how", ["A B", "-a -b", "twice on A"])
def test_the_same_run_twice_is_refused(cli, how):
    # GIVEN the same run directory twice WHEN compared THEN exit 2, one line, no traceback
    args = {"A B": [str(OFF), str(OFF)], "-a -b": ["-a", str(OFF), "-b", str(OFF)],
            "twice on A": ["-a", str(OFF), "-a", str(OFF), "-b", str(ON)]}[how]
    proc = cli("compare", *args)
    one_clear_line(proc, str(OFF), "give different runs")
    assert ("twice on side A" if how == "twice on A" else "on both sides") in proc.stderr


def test_the_same_run_under_another_spelling_is_refused(tmp_path, cli):
    # GIVEN the off run once by its path and once through a symlink, and once as ../ with a trailing slash
    link = tmp_path / "my-off-run"
    link.symlink_to(OFF, target_is_directory=True)
    dotted = f"{SAMPLE}/../{SAMPLE.name}/01-off/"
    for other in (str(link), dotted):
        # WHEN compared with itself THEN exit 2 naming both spellings as the same run
        one_clear_line(cli("compare", str(OFF), other), "are the same run", "on both sides", str(OFF))
    # AND a table given twice through a hard link is the same rows
    a = write_csv(tmp_path / "a.csv", ["output_throughput"], [[100.0], [101.0]])
    os.link(a, tmp_path / "a-again.csv")
    one_clear_line(cli("compare", str(a), str(tmp_path / "a-again.csv")), "#1 are the same run", "on both sides")


def test_a_side_mixing_off_and_on_runs_is_refused(tmp_path, cli):
    # GIVEN side A holding an off and an on run (given one by one, or as a folder of both)
    mixed = tmp_path / "mixed"
    run_dir(mixed / "r1", overlay=False, metrics={"output_throughput": 10.0})
    run_dir(mixed / "r2", overlay=True, metrics={"output_throughput": 10.5})
    on = run_dir(tmp_path / "on", overlay=True, metrics={"output_throughput": 10.6})
    # WHEN compared THEN exit 2 naming the side and a run of each state
    needles = ("side A mixes overlay-off and overlay-on runs", "r1: off", "r2: on")
    one_clear_line(cli("compare", "-a", str(mixed / "r1"), "-a", str(mixed / "r2"), "-b", str(on)), *needles)
    one_clear_line(cli("compare", str(mixed), str(on)), *needles)
    # AND both sides of one state is refused too
    one_clear_line(cli("compare", str(mixed / "r2"), str(on)), "both sides hold overlay-on runs")
    # AND a crashed on run in a folder of off runs is left out, not counted as mixing
    offs = tmp_path / "offs"
    run_dir(offs / "r1", overlay=False, metrics={"output_throughput": 10.0})
    run_dir(offs / "r2", overlay=True, metrics={}, status="crashed")
    out = ok_json(cli("compare", str(offs), str(on), "--json"))
    assert out["a"]["runs"] == ["r1"] and out["a"]["overlay"] == "off"


@pytest.mark.parametrize("value,drop,shown", [(None, True, "null"), (None, False, "null"), ("auto", False, '"auto"'),
                                              (True, False, "true")])
def test_a_run_without_a_usable_overlay_state_is_refused(tmp_path, cli, value, drop, shown):
    # GIVEN an off run and a run directory whose manifest records no off/on state (absent, null, other)
    off = run_dir(tmp_path / "off", overlay=False, metrics={"output_throughput": 10.0})
    odd = _set_overlay(run_dir(tmp_path / "odd", overlay=True, metrics={"output_throughput": 10.5}), value, drop=drop)
    # WHEN compared, in either order THEN exit 2: its side is unknown, never guessed from its position
    for args in ((off, odd), (odd, off)):
        one_clear_line(cli("compare", *map(str, args)), str(odd), f'"overlay": {shown}', "its side is unknown")


def test_a_switchback_run_is_refused_as_one_side(tmp_path, cli):
    # GIVEN a switchback run (blocks of steps off and on inside one server) and an off run
    sb = _set_overlay(run_dir(tmp_path / "sb", overlay=True, metrics={"output_throughput": 10.5}), "switchback")
    off = run_dir(tmp_path / "off", overlay=False, metrics={"output_throughput": 10.0})
    # WHEN put on one side of an A/B comparison THEN exit 2, pointing at compare with that run alone
    one_clear_line(cli("compare", str(off), str(sb)), "a switchback run", f"`expo-prof compare {sb}` alone")


def test_tables_keep_the_argument_order_and_labels(tmp_path, cli):
    # GIVEN two tables (no manifest) given with the higher throughput first, named on/off as the user sees them
    first = write_csv(tmp_path / "x.csv", ["output_throughput"], [[110.0], [111.0], [109.0]])
    second = write_csv(tmp_path / "y.csv", ["output_throughput"], [[100.0], [101.0], [99.0]])
    out = ok_json(cli("compare", str(first), str(second), "--labels", "on,off", "--json"))
    # THEN side A is the first argument, with the first name; nothing is reordered; no side records a state
    assert (out["a"]["name"], out["a"]["sources"]) == ("on", [str(first)])
    assert out["reordered"] is None and out["a"]["overlay"] is None and out["b"]["overlay"] is None
    assert metric(out, "output_throughput")["change_pct"] == pytest.approx(-100 * 10 / 110)


def test_a_table_beside_an_on_run_takes_the_off_side(tmp_path, cli):
    # GIVEN an overlay-on run given as A and a table (no manifest) as B
    on = run_dir(tmp_path / "on", overlay=True, metrics={"output_throughput": 10.5})
    table = write_csv(tmp_path / "t.csv", ["output_throughput"], [[10.0]])
    out = ok_json(cli("compare", str(on), str(table), "--json"))
    # THEN the run goes to the on side and the table to the off side, with the note
    assert out["a"]["sources"] == [str(table)] and (out["b"]["runs"], out["b"]["overlay"]) == (["on"], "on")
    assert out["a"]["overlay"] is None and out["reordered"].startswith("sides swapped")
    assert metric(out, "output_throughput")["change_pct"] == pytest.approx(5.0)


def test_a_session_follows_its_manifests(tmp_path, cli):
    # GIVEN a session whose session.json does not say the second run's state (null), its manifest says on
    s = session_dir(tmp_path / "s", [(False, {"output_throughput": 100.0}, None),
                                     (True, {"output_throughput": 104.0}, None)])
    doc = json.loads((s / "session.json").read_text())
    doc["runs"][1]["overlay"] = None
    (s / "session.json").write_text(json.dumps(doc))
    # WHEN compared THEN the run is on the on side (not taken as off for want of a value)
    out = ok_json(cli("compare", str(s), "--json"))
    assert out["b"]["runs"] == ["02-on"] and (out["a"]["overlay"], out["b"]["overlay"]) == ("off", "on")
    # AND GIVEN session.json contradicting a manifest THEN exit 2 naming both
    doc["runs"][1]["overlay"] = False
    (s / "session.json").write_text(json.dumps(doc))
    one_clear_line(cli("compare", str(s)), "02-on", "manifest records overlay on", "session.json lists it as off")
