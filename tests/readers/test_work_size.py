"""readers/file_bytes.work_size: the bytes a reader will parse, known without decompressing (issue 41).

What ``--jobs`` decides by (expo_prof/pipeline/parallel.py): a gzipped trace holds 10 to 30 times its size on
disk in JSON. GIVEN real gzipped traces and small files written here, WHEN sized, THEN a one-member gzip file
gives its true decompressed length (its trailer's ISIZE), a plain file its size, and a gzip file whose trailer
states less than its size on disk (it cannot be the file's: several members, incompressible data, a file of
4 GiB or more) the size on disk times GZIP_RATIO.
"""

from __future__ import annotations

import gzip
import os

import pytest

from expo_prof.readers.file_bytes import GZIP_RATIO, work_size

REAL_GZ = ["vllm-cpu/rank0-default-with-stack.pt.trace.json.gz", "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz",
           "hta/tests/data/trace_diff/control/control.json.gz"]


@pytest.mark.parametrize("name", REAL_GZ)
def test_a_real_gzip_trace_is_sized_by_its_trailer_exactly(realtraces, name):
    # GIVEN a real gzipped trace (one gzip member, under 4 GiB)
    path = realtraces / name
    # WHEN sized THEN the estimate is its true decompressed length, many times its size on disk
    true = len(gzip.decompress(path.read_bytes()))
    assert work_size(path) == true
    assert true > 10 * path.stat().st_size


def test_a_plain_file_is_its_size(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": []}' * 100)
    assert work_size(p) == p.stat().st_size


def test_a_trailer_below_the_size_on_disk_falls_back_to_the_ratio(tmp_path):
    # GIVEN gzip files whose trailer states less than their size on disk: incompressible data, and two members
    # the last of which is one byte (the trailer holds only the last member's length)
    noise = tmp_path / "noise.json.gz"
    noise.write_bytes(gzip.compress(os.urandom(50_000)))
    two = tmp_path / "two.json.gz"
    two.write_bytes(gzip.compress(b"[" + b'{"ph": "X"},' * 20_000) + gzip.compress(b"]"))
    for p in (noise, two):
        # WHEN sized THEN the trailer is not taken: the size on disk times the ratio of real traces is
        assert work_size(p) == p.stat().st_size * GZIP_RATIO


def test_a_folder_or_a_missing_file_is_its_size_on_disk(tmp_path):
    assert work_size(tmp_path / "missing.json.gz") == 0
    assert work_size(tmp_path) == tmp_path.stat().st_size
