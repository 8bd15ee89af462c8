"""A GENERATED run directory whose trace holds hostile names (issue 27), for the page and terminal tests.

It is the committed sample run ``traces/samples/tiny-cpu-off-on/02-on`` (a real vLLM CPU run, its real Kineto
trace) with some ops renamed: every ``aten::mean`` event to :data:`RTL` (a right-to-left override in the middle
of a name), ``aten::pow`` to :data:`SCRIPT` (closes a script element), ``aten::silu`` to :data:`IMG` (an image
whose error handler sets a global), three ``aten::rsqrt`` events to :data:`HUGE` (a 1 MiB name), ``aten::mul``
to :data:`ESC` (a terminal escape sequence), and the model thread to :data:`THREAD`. Every hostile name starts
with ``EVIL``: ``--op ^EVIL`` makes them the instances, so they are what the pages' tables and tooltips show.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

SAMPLE_RUN = Path(__file__).resolve().parents[2] / "traces" / "samples" / "tiny-cpu-off-on" / "02-on"
#: A right-to-left override (U+202E) before "CDEF": shown as itself it would render "AB FEDC".
RTL = "EVIL AB\u202eCDEF"
SCRIPT = "EVIL </script><script>window.__xss = 'script'</script>"
IMG = "EVIL <img src=x onerror=\"window.__xss = 'img'\">"
HUGE = "EVIL " + "x" * (1 << 20)
ESC = "EVIL \x1b[31mred\x1b[0m"
#: The model thread's name: markup and an isolate opened (U+2067) and never closed.
THREAD = "<img src=x onerror=\"window.__xss = 'thread'\">\u2067lane"
#: Ops none of which runs inside another (an instance inside an instance counts once, as the outer one).
RENAMES = {"aten::mean": RTL, "aten::pow": SCRIPT, "aten::silu": IMG, "aten::mul": ESC}
OP = "^EVIL"


def hostile_run(out: Path) -> Path:
    """Write the run directory described above to ``out`` (a new folder); returns it."""
    shutil.copytree(SAMPLE_RUN, out)
    (out / "analysis.json").unlink(missing_ok=True)
    for trace in (out / "profiler").glob("rank0.*.pt.trace.json.gz"):
        doc = json.loads(gzip.decompress(trace.read_bytes()))
        huge_left = 3
        for e in doc["traceEvents"]:
            name = e.get("name")
            if name in RENAMES:
                e["name"] = RENAMES[name]
            elif name == "aten::rsqrt" and huge_left:
                e["name"] = HUGE
                huge_left -= 1
            elif e.get("ph") == "M" and name == "thread_name" and "VLLM::Worker" in str(e["args"].get("name")):
                e["args"]["name"] = THREAD
        trace.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
    return out
