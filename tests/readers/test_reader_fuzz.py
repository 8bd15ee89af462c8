"""Seeded fuzz pass over the readers: random truncations and byte edits of small real files.

Every mutated file must give either Timelines with consistent columns or a
one-line BadInput; anything else fails. Cases are a pure function of
``(format, seed)`` (tests/readers/fuzz_cases.py): CI runs seeds
``0..EXPO_PROF_FUZZ_SEEDS-1`` (default 100) for every format, so a red run is
reproducible and names its seeds; ``make fuzz`` tries new seeds for longer,
and what it finds joins ``REGRESSIONS``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fuzz_cases import (  # type: ignore[import-not-found]
    REGRESSIONS,
    SEED_FILES,
    check,
    mutations,
    nsys_cell_edits,
    nsys_export_bytes,
    run_case,
)

N_SEEDS = int(os.environ.get("EXPO_PROF_FUZZ_SEEDS", "100"))


@pytest.fixture(scope="module")
def seeds(rt) -> dict[str, bytes]:
    """Small real inputs, one per reader (file name -> bytes)."""
    return {name: get(rt) for name, get in SEED_FILES.items()}


@pytest.mark.parametrize("name", list(SEED_FILES))
def test_fuzzed_real_files_give_a_timeline_or_bad_input(seeds, name, tmp_path):
    """GIVEN a small real file of each format with seeded random truncations / byte edits
    WHEN loaded THEN the result is Timelines with consistent columns or a one-line BadInput."""
    failures = []
    for seed in range(N_SEEDS):
        why = run_case(seeds[name], name, mutations(seed, len(seeds[name])), tmp_path)
        if why is not None:
            failures.append(f"seed {seed}: {why}")
    assert not failures, (f"{name}: {len(failures)} of {N_SEEDS} seeds fail (reproduce: "
                          f"python bench/fuzz_readers.py --format {name} --seed N):\n" + "\n".join(failures[:10]))


@pytest.mark.parametrize("schema", ["2022", "2024"])
def test_nsys_exports_with_odd_cells_dropped_tables_and_rows_read_cleanly(schema, tmp_path):
    """GIVEN a GENERATED nsys export whose cells are set to NULL / text / blobs / floats / int64 extremes, whose
    tables are dropped or rows deleted (seeded: a valid database the reader must make sense of)
    WHEN loaded THEN Timelines with consistent columns or a one-line BadInput, never a traceback."""
    data = nsys_export_bytes(schema)
    failures = []
    for seed in range(N_SEEDS):
        p = tmp_path / f"cells-{seed}.sqlite"
        p.write_bytes(data)
        done = nsys_cell_edits(seed, p)
        why = check(p)
        if why is not None:
            failures.append(f"seed {seed} ({'; '.join(done)}): {why}")
        p.unlink()
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("what,name,muts", REGRESSIONS, ids=[r[0] for r in REGRESSIONS])
def test_cases_fuzzing_once_found_stay_fixed(seeds, what, name, muts, tmp_path):
    """GIVEN an edit that a fuzz run once found to break a reader WHEN loaded THEN it reads cleanly now."""
    assert run_case(seeds[name], name, muts, tmp_path) is None, what


def test_fuzz_seeds_load_unmutated(seeds, tmp_path):
    """GIVEN the unmutated seeds WHEN loaded THEN each is a clean Timeline (so the fuzz starts from valid inputs)."""
    for name, data in seeds.items():
        p = Path(tmp_path) / name
        p.write_bytes(data)
        assert check(p) is None, name


def test_cases_are_a_pure_function_of_the_seed():
    """GIVEN a seed WHEN its edits are drawn twice THEN they are the same (a failing seed reproduces)."""
    assert mutations(1234, 10_000) == mutations(1234, 10_000)
    assert mutations(1234, 10_000) != mutations(1235, 10_000)
