"""Words for people: counts with the right plural, durations, what a forward figure measures, and the verdict's
words. Shared by every layer (like errors.py)."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 run``, ``2 runs``, ``0 runs`` (``many`` for an irregular plural: ``plural(2, "ms", "ms")``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def fmt_ns(ns: float | None, *, signed: bool = False) -> str:
    """A duration of ``ns`` nanoseconds for people — the one formatter of every output (tables, headlines,
    statements, the pages' Python side): ``812 ns``, ``12.3 µs``, ``4.56 ms``, ``1.234 s`` (the pages' own
    ``Expo.fmtNs`` in static/common.js prints the same); ``–`` when not measured. ``signed``: a change, with its
    sign (``+52.4 µs``, ``-1.73 ms``)."""
    if ns is None:
        return "–"
    sign = "+" if signed else ""
    a = abs(ns)
    if a < 1_000:
        return f"{ns:{sign}.0f} ns"
    if a < 1_000_000:
        return f"{ns / 1e3:{sign}.1f} µs"
    if a < 1_000_000_000:
        return f"{ns / 1e6:{sign}.2f} ms"
    return f"{ns / 1e9:{sign}.3f} s"


#: Characters never shown as themselves (terminal and pages alike): C0 controls but tab, DEL, C1
#: controls (an ESC sequence would recolour or rewrite the terminal), the Arabic letter mark, LRM / RLM, the
#: bidirectional embeddings and overrides U+202A–202E, the isolates U+2066–2069 (a right-to-left override in a
#: name would reverse the text after it) and the line / paragraph separators. static/common.js ``show`` is the
#: pages' twin.
_HIDDEN = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
#: Most characters of one text shown by :func:`visible` (the pages' TEXT_MAX).
TEXT_MAX = 4096


def visible(text: object, limit: int = TEXT_MAX) -> str:
    """``text`` as people see it: the characters above as ``\\uXXXX`` escapes, cut at ``limit`` characters with a
    count of the rest (a 1 MB name stays one line). The data (``--json``, exports) keeps the text whole."""
    s = str(text)
    out = s[:limit] if len(s) > limit else s
    out = _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    return out + (f"… (+{len(s) - limit:,} characters)" if len(s) > limit else "")


def cut(text: str, limit: int) -> str:
    """``text`` cut at ``limit`` characters with a count of the rest (``… (+N characters)``), else whole: a name
    as an output keeps it where the full name is held elsewhere (no escaping: see :func:`visible`)."""
    return text if len(text) <= limit else f"{text[:limit]}… (+{len(text) - limit:,} characters)"


#: The end of a name cut by :func:`cut_name`: the count of the characters left out and a hash of the whole name.
_CUT_MARK = re.compile(r"… \(\+([0-9,]+) characters #([0-9a-f]{12})\)\Z")


def cut_name(text: str, keep: int) -> str:
    """A name cut to its first ``keep`` characters, then ``… (+N characters #HASH)``: N counts what was left out
    and HASH (48 bits of BLAKE2b of the whole name) keeps two long names that share their first characters apart,
    so a cut name still interns as its name did. A name cut before is cut further with its own count and hash;
    one that is short enough stays as it is."""
    m = _CUT_MARK.search(text)
    head, rest = (text[: m.start()], int(m.group(1).replace(",", ""))) if m else (text, 0)
    if len(head) <= keep and (m or len(text) <= keep):
        return text
    if m:
        digest = m.group(2)
    else:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    return f"{head[:keep]}… (+{len(head) - keep + rest:,} characters #{digest})"


def is_cut_name(text: str) -> bool:
    """Whether ``text`` is a name :func:`cut_name` cut."""
    return _CUT_MARK.search(text) is not None


#: The verdict's words, the same wherever a saving or an A/B change is judged (compare, ab, switchback).
ENABLE = "enable"
KEEP_OFF = "keep off"
NO_DIFFERENCE = "no significant difference"
#: Too little data for any test (one run per side, fewer than two block pairs): nothing can be said either way.
INCONCLUSIVE = "inconclusive"
#: A sequential switchback whose confidence sequence lies inside ±margin: the overlay does not matter here.
NO_EFFECT = "no effect beyond the margin"
#: A sequential switchback whose budget ran out before its confidence sequence settled.
UNDECIDED = "undecided"


#: ``forward_source`` (docs/json-output.md, "Steps") of a forward figure that is the length of a span → that span.
FORWARD_SPANS = {
    "expo_prof::forward": "expo_prof::forward span",
    "gpu_model_runner: forward": "vLLM gpu_model_runner: forward span",
    "execute_context": "vLLM execute_context step span",
}
#: ``forward_source`` of a figure that is the busy time of the compute lanes: no forward span in the trace.
COMPUTE_BUSY = "compute-busy"
#: ``summary.forward_source`` when the ranks' sources differ (each rank's is in ``ranks[].forward_source``).
MIXED = "mixed"


def forward_label(source: str | None) -> str:
    """What a forward figure is, named by where it comes from — the label wherever forward is printed:
    ``forward (expo_prof::forward span)``, ``compute busy (no forward span)``, ``forward (mixed sources)``;
    plain ``forward`` when the source is unknown (a table given by the user)."""
    if source is None:
        return "forward"
    if source == COMPUTE_BUSY:
        # Not a forward pass at all: the time the compute lanes were busy in the step (kernels, host ops).
        return "compute busy (no forward span)"
    if source == MIXED:
        return "forward (mixed sources)"
    return f"forward ({FORWARD_SPANS.get(source, source + ' span')})"


def forward_source_words(source: str | None) -> str:
    """What a forward figure is the time of, beside a short ``forward`` / ``compute busy`` label:
    ``the expo_prof::forward span``, ``no forward span: the compute lanes' busy time``."""
    if source is None:
        return "source not stated"
    if source == COMPUTE_BUSY:
        return "no forward span: the compute lanes' busy time"
    if source == MIXED:
        return "sources differ across ranks"
    return "the " + FORWARD_SPANS.get(source, source + " span")


def common_forward_source(sources: Iterable[str | None]) -> str | None:
    """The one source of several forward figures (ranks, runs): :data:`MIXED` when they differ, None when none
    is known. A mix is said, never hidden behind the first one's source."""
    known = {s for s in sources if s is not None}
    if not known:
        return None
    return known.pop() if len(known) == 1 else MIXED


def forward_sources_by_rank(by_rank: Iterable[tuple[int, str]]) -> str:
    """Each source with its ranks, for the line that explains a mix:
    ``rank 0: forward (expo_prof::forward span); ranks 1, 2: compute busy (no forward span)``."""
    ranks: dict[str, list[int]] = defaultdict(list)
    for rank, source in by_rank:
        ranks[source].append(rank)
    parts = []
    for source, rs in sorted(ranks.items(), key=lambda kv: min(kv[1])):
        rs = sorted(set(rs))
        parts.append(f"{'rank' if len(rs) == 1 else 'ranks'} {', '.join(map(str, rs))}: {forward_label(source)}")
    return "; ".join(parts)


#: What each source of the sampler's wait measures (``Totals.wait_source``; docs/glossary.md, "wait").
WAIT_SOURCES = {"span": "the trace's expo_prof::wait spans (the wait call and its own entry and exit)",
                "log window": "the overlay log's wait windows (the wait alone)"}


#: The wait's short name per source, for table columns and rows that must fit 80 columns.
WAIT_SHORT = {"span": "span wait", "log window": "log wait"}


def wait_short(source: str | None) -> str:
    """The short name of the wait a source measured (``span wait``, ``log wait``; both joined by ``+``), for narrow
    table columns; ``wait`` when none measured it. The long name is :func:`wait_label`'s."""
    if not source:
        return "wait"
    return "+".join(WAIT_SHORT.get(s, s) for s in source.split("+"))


def wait_label(source: str | None) -> str:
    """The sampler's wait, named by the source that measured it: ``sampler wait (span)``, ``sampler wait (log
    window)``, ``sampler wait (span+log window)``; ``sampler wait`` when none measured it. Two sources measure
    different spans of time (the span encloses the window), so they never print under one name."""
    return f"sampler wait ({source})" if source else "sampler wait"
