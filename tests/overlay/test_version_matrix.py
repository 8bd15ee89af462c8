"""Each row of the version matrix in docs/overlay.md, re-checked against its real wheel.

GIVEN the real wheel of a vLLM / vllm-ascend release on PyPI (only the members the checks read, fetched by
range into ``~/.cache/expo-prof/wheel-files`` once per machine: tools/release_files.py), WHEN the overlay's patch code is
run against its real sources (tools/overlay_matrix.py), THEN the runner has a
seam ``execute_model`` calls, the replacement ``random_sample`` has exactly the
original's parameters, one CPU step gives the original's tokens — or, on a vLLM
without Model Runner V1 (0.34 on), the patch steps aside with its one notice —
and the documented row says the same.
"""

from __future__ import annotations

import json
import sys

import pytest

from shared_paths import REPO

sys.path.insert(0, str(REPO / "tools"))
import overlay_matrix  # noqa: E402


@pytest.fixture(scope="module")
def documented():
    return overlay_matrix.documented_rows()


@pytest.fixture(scope="module")
def stored():
    from overlay.sourcecheck import STORE

    return json.loads(STORE.read_text())


@pytest.mark.parametrize("dist,version", overlay_matrix.rows(), ids=lambda v: str(v))
def test_release_row(dist, version, documented, stored, pypi_wheels):
    files = pypi_wheels(dist, version)
    row = overlay_matrix.check(dist, version)
    assert row.clean, row
    assert documented.get((dist, version)) == row.cells(), "docs/overlay.md is stale: run tools/overlay_matrix.py"
    # AND the start-up check's record of it is current: every row that applies, and only those, is in the store
    stale = "overlay/checked_sources.json is stale: run tools/overlay_matrix.py"
    assert stored.get(dist, {}).get(version) == (row.fingerprint if row.works else None), stale
    # AND the start-up check's cut-out functions read exactly what a parse of the whole files reads
    if row.works:
        assert overlay_matrix.fingerprint_of(dist, files, whole=True) == row.fingerprint


def test_store_has_only_matrix_rows(stored):
    # GIVEN the store the start-up check compares with WHEN its releases are listed THEN each is a matrix row
    assert {(d, v) for d, releases in stored.items() for v in releases} <= set(overlay_matrix.rows())


def test_table_has_every_row_and_no_other(documented):
    # GIVEN the generated table WHEN its keys are read THEN they are exactly the matrix rows
    assert sorted(documented) == sorted(overlay_matrix.rows())


def test_two_argument_random_sample_keeps_two_parameters():
    # GIVEN a vLLM <= 0.22 style random_sample(probs, generators)
    from overlay.patches.topk_topp import make_random_sample
    from overlay.sampler import sample_with_noise

    def random_sample(probs, generators):
        return probs.argmax(dim=-1)

    # WHEN the overlay builds its replacement THEN calling it with a third argument fails like the original
    replacement = make_random_sample(random_sample, sample_with_noise)
    import inspect

    assert list(inspect.signature(replacement, follow_wrapped=False).parameters) == ["probs", "generators"]
    with pytest.raises(TypeError):
        replacement(None, {}, False)
