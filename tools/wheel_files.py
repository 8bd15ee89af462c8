"""A few source files out of a release's wheel on PyPI, without downloading the wheel.

The version matrix (tools/overlay_matrix.py) reads two to four ``.py`` files of
each of 40 vLLM / vllm-ascend releases; the wheels they sit in weigh about 8.8 GB
together (a vLLM wheel is ~400 MB of compiled kernels). A wheel is a zip file,
and a zip's table of contents (the central directory) sits at its end, so HTTP
range requests to PyPI's file host fetch that directory and then only the
members asked for: a few hundred KB per release, once.

* Where: the package index pip uses by default (``https://pypi.org/simple/``,
  PEP 503; ``EXPO_PROF_WHEEL_INDEX`` for a mirror that serves ranges), the
  first x86-64 wheel of the release (CPython 3.11 preferred: the Python sources
  are the same in every platform's wheel).
* Cache: every member read, and the wheel's list of names, lands under
  ``~/.cache/expo-prof/wheel-files/<dist>-<version>/`` (``EXPO_PROF_WHEEL_FILES``),
  outside the checkout so every clone and CI run on a machine shares it; a whole
  wheel already in the wheel cache (``EXPO_PROF_WHEEL_CACHE``, what earlier
  versions of the matrix downloaded, or ``pip download --no-deps``) is read
  directly and nothing is fetched.
* Integrity: each member is checked against the CRC-32 of the wheel's own
  directory (``zipfile`` does it on read), so a short or wrong range is an error,
  never a wrong source.
"""

from __future__ import annotations

import fcntl
import html.parser
import io
import json
import os
import re
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

#: Whole wheels (earlier runs of the matrix, ``pip download``): read in place when present.
WHEEL_CACHE = Path(os.environ.get("EXPO_PROF_WHEEL_CACHE") or Path.home() / ".cache" / "expo-prof" / "wheels")
#: Members fetched by range, per release.
FILES_CACHE = Path(os.environ.get("EXPO_PROF_WHEEL_FILES") or Path.home() / ".cache" / "expo-prof" / "wheel-files")
INDEX = os.environ.get("EXPO_PROF_WHEEL_INDEX", "https://pypi.org/simple/")
TIMEOUT_S = 120.0
#: Bytes per range request: a vLLM wheel's directory (~4,000 names) is a few hundred KB; one request
#: usually brings a member's local header and data together.
BLOCK = 1 << 18


class _Links(html.parser.HTMLParser):
    """The ``href`` of every link on a PEP 503 project page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]


def wheel_url(dist: str, version: str) -> str:
    """URL of the x86-64 wheel of ``dist==version`` on the index (CPython 3.11 or abi3 first)."""
    name = re.sub(r"[-_.]+", "-", dist).lower()
    page = urllib.parse.urljoin(INDEX, name + "/")
    with urllib.request.urlopen(page, timeout=TIMEOUT_S) as resp:
        parser = _Links()
        parser.feed(resp.read().decode("utf-8", "replace"))
    stem = f"{dist.replace('-', '_')}-{version}-"
    found = []
    for href in parser.hrefs:
        url = urllib.parse.urljoin(page, href).split("#", 1)[0]
        fname = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        if fname.startswith(stem) and fname.endswith(".whl") and "x86_64" in fname:
            found.append((0 if "cp311" in fname else 1 if "abi3" in fname else 2, fname, url))
    if not found:
        raise FileNotFoundError(f"no x86-64 wheel {stem}*.whl on {page}")
    return min(found)[2]


class RangeReader(io.RawIOBase):
    """A read-only, seekable file over HTTP range requests, in cached blocks (what ``zipfile`` needs)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url, self.pos, self.blocks = url, 0, {}
        req = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            self.size = int(resp.headers["Content-Length"])
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def _block(self, k: int) -> bytes:
        if k not in self.blocks:
            lo, hi = k * BLOCK, min(self.size, (k + 1) * BLOCK) - 1
            req = urllib.request.Request(self.url, headers={"Range": f"bytes={lo}-{hi}"})
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                if resp.status != 206:  # a server that ignores Range would send the whole wheel
                    raise OSError(f"{self.url}: range request answered {resp.status}, not 206")
                data = resp.read()
            if len(data) != hi - lo + 1:
                raise OSError(f"{self.url}: range {lo}-{hi} returned {len(data)} bytes")
            self.blocks[k] = data
            self.requests += 1
        return self.blocks[k]

    def readinto(self, buf) -> int:  # type: ignore[override]
        n = min(len(buf), self.size - self.pos)
        out = memoryview(buf)
        done = 0
        while done < n:
            k, off = divmod(self.pos + done, BLOCK)
            chunk = self._block(k)[off:off + n - done]
            out[done:done + len(chunk)] = chunk
            done += len(chunk)
        self.pos += n
        return n


class WheelFiles:
    """The members of one release's wheel, read from a whole cached wheel or fetched by range and cached."""

    def __init__(self, dist: str, version: str) -> None:
        self.dist, self.version = dist, version
        self.dir = FILES_CACHE / f"{dist}-{version}"
        whole = sorted(WHEEL_CACHE.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
        #: A whole wheel on this machine: read in place, nothing fetched or cached.
        self._local: zipfile.ZipFile | None = zipfile.ZipFile(whole[0]) if whole else None
        #: The wheel on PyPI, opened by range on the first member not in the cache.
        self._ranged: zipfile.ZipFile | None = None
        self._names: list[str] | None = None

    def _fetch(self) -> zipfile.ZipFile:
        if self._ranged is None:
            self._ranged = zipfile.ZipFile(io.BufferedReader(RangeReader(wheel_url(self.dist, self.version)), BLOCK))
        return self._ranged

    def namelist(self) -> list[str]:
        """Every member name of the wheel."""
        if self._names is None:
            listing = self.dir / "names.json"
            if self._local is not None:
                self._names = self._local.namelist()
            elif listing.is_file():
                self._names = json.loads(listing.read_text())
            else:
                self._names = self._fetch().namelist()
                _write(listing, json.dumps(self._names).encode())
        return self._names

    def read(self, name: str) -> bytes:
        """The bytes of member ``name`` (KeyError when the wheel has none)."""
        if self._local is not None:
            return self._local.read(name)
        cached = self.dir / "files" / name
        if cached.is_file():
            return cached.read_bytes()
        data = self._fetch().read(name)
        _write(cached, data)
        return data

    def close(self) -> None:
        for z in (self._local, self._ranged):
            if z is not None:
                z.close()

    def __enter__(self) -> WheelFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (parallel runs on one machine share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(FILES_CACHE / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
