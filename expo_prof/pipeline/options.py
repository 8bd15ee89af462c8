"""The options every analysing command shares, validated once: target, source choice, size cap, workers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from expo_prof.analysis.rollup import SOURCES
from expo_prof.errors import BadInput
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"800M"``, ``"4GiB"``, ``"1.5g"``, ``"1000000"`` → bytes (powers of 1024 for suffixes)."""
    m = _SIZE_RE.match(text)
    if not m:
        raise BadInput(f"--max-bytes {text!r}: expected a size such as 800M, 4G or 1000000")
    value = float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2).lower() or "_")
    if value < 1:
        raise BadInput(f"--max-bytes {text!r}: must be at least 1 byte")
    return int(value)


def compile_op(op: str | None) -> re.Pattern | None:
    """``--op REGEX`` compiled (None for the exponential draw); BadInput with one line when it is not a regex."""
    if op is None:
        return None
    try:
        return re.compile(op)
    except re.error as exc:
        raise BadInput(f"--op {op!r} is not a valid regular expression: {exc}") from None


def check_source(source: str) -> str:
    """``--source``, checked (BadInput naming the choices)."""
    if source not in SOURCES:
        raise BadInput(f"--source {source!r}: expected one of {', '.join(SOURCES)}")
    return source



@dataclass(frozen=True)
class Options:
    """What to analyse and how; build with :meth:`make`, which validates everything once."""

    #: ``--op REGEX``: any side-lane op instead of the exponential draw (None: the draw).
    op: str | None = None
    source: str = "auto"
    max_bytes: int = DEFAULT_MAX_DECOMPRESSED
    pattern: re.Pattern | None = field(default=None, compare=False, repr=False)
    #: ``--jobs N``: worker processes reading and analysing files side by side (1: in this process).
    jobs: int = 1
    #: ``--ray [ADDRESS]``: read and analyse on a Ray cluster ("" : a local Ray; None: not on Ray).
    ray: str | None = None
    #: Keep every event of what was counted (the timeline page and the export draw them); False: a parallel
    #: read sends back only each file's analysis and a compact Timeline (expo_prof.timeline.compact).
    events: bool = True

    @classmethod
    def make(cls, op: str | None = None, source: str = "auto", max_bytes: int | str | None = None,
             jobs: int | None = None, ray: str | None = None, events: bool = True) -> Options:
        """Validated options (BadInput with one line on a bad regex, source, size or job count)."""
        pattern = compile_op(op)
        check_source(source)
        if max_bytes is None:
            cap = DEFAULT_MAX_DECOMPRESSED
        elif isinstance(max_bytes, str):
            cap = parse_size(max_bytes)
        else:
            cap = int(max_bytes)
            if cap < 1:
                raise BadInput(f"--max-bytes {max_bytes}: must be at least 1 byte")
        if jobs is None:
            jobs = 1
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise BadInput(f"--jobs {jobs!r}: must be a whole number of at least 1")
        return cls(op=op, source=source, max_bytes=cap, pattern=pattern, jobs=jobs, ray=ray, events=events)

    @property
    def is_draw(self) -> bool:
        """True when the target is the exponential draw (the wording of every output follows the target)."""
        return self.op is None
