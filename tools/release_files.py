"""A few source files out of a release on PyPI: from its wheel without downloading the wheel, or from its
source archive where the release ships no wheel.

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
* Source archives: from 0.27.1rc1 vllm-ascend publishes only a ``.tar.gz``
  (about 20 MB). A gzip stream cannot be read by range, so it is streamed once
  (never held whole in memory or on disk) and every ``.py`` file of the
  package (about 7 MB) lands in the same cache, its list of names written
  last: a release whose names are cached is complete. The archive's top folder
  (``vllm_ascend-0.30.0rc2/``) is dropped, so member names are the wheel's. A
  ``.tar.gz`` in the wheel cache (``pip download --no-deps --no-binary :all:``)
  is read in place.
"""

from __future__ import annotations

import contextlib
import fcntl
import html.parser
import io
import json
import os
import re
import tarfile
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


def release_url(dist: str, version: str) -> str:
    """URL of the x86-64 wheel of ``dist==version`` on the index (CPython 3.11 or abi3 first), else of its source
    archive (``.tar.gz``)."""
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
        elif fname == f"{stem[:-1]}.tar.gz":
            found.append((3, fname, url))
    if not found:
        raise FileNotFoundError(f"no x86-64 wheel {stem}*.whl nor {stem[:-1]}.tar.gz on {page}")
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


class ReleaseFiles:
    """The files of one release: from a whole cached wheel or source archive, or fetched (a wheel's members by
    range, a source archive's ``.py`` files by one stream) and cached."""

    def __init__(self, dist: str, version: str) -> None:
        self.dist, self.version = dist, version
        self.dir = FILES_CACHE / f"{dist}-{version}"
        stem = dist.replace("-", "_")
        whole = sorted(WHEEL_CACHE.glob(f"{stem}-{version}-*.whl"))
        #: A whole wheel on this machine: read in place, nothing fetched or cached.
        self._local: zipfile.ZipFile | None = zipfile.ZipFile(whole[0]) if whole else None
        #: A whole source archive on this machine: its files are cached from it instead of from the index.
        archive = WHEEL_CACHE / f"{stem}-{version}.tar.gz"
        self._archive = archive if archive.is_file() and self._local is None else None
        #: The wheel on PyPI, opened by range on the first member not in the cache.
        self._ranged: zipfile.ZipFile | None = None
        self._names: list[str] | None = None

    def _fetch(self) -> zipfile.ZipFile | None:
        """The wheel by range; None when the release was a source archive (its files are then all cached)."""
        if self._ranged is None:
            url = release_url(self.dist, self.version) if self._archive is None else None
            if url is None or url.endswith(".tar.gz"):
                self._names = self._unpack(url)
                return None
            self._ranged = zipfile.ZipFile(io.BufferedReader(RangeReader(url), BLOCK))
        return self._ranged

    def _unpack(self, url: str | None) -> list[str]:
        """Stream the source archive once, caching every ``.py`` file of the package; returns their names."""
        package = self.dist.replace("-", "_") + "/"
        names = []
        with contextlib.ExitStack() as stack:
            if url is None:
                raw = stack.enter_context(open(self._archive, "rb"))  # type: ignore[arg-type]
            else:
                raw = stack.enter_context(urllib.request.urlopen(url, timeout=TIMEOUT_S))
            tar = stack.enter_context(tarfile.open(fileobj=raw, mode="r|gz"))
            for member in tar:
                # "vllm_ascend-0.30.0rc2/vllm_ascend/sample/sampler.py" -> "vllm_ascend/sample/sampler.py"
                name = member.name.split("/", 1)[-1]
                if not (member.isfile() and name.startswith(package) and name.endswith(".py")):
                    continue
                data = tar.extractfile(member)
                if data is not None:
                    _write(self.dir / "files" / name, data.read())
                    names.append(name)
        if not names:
            raise FileNotFoundError(f"{self.dist} {self.version}: no {package}*.py in its source archive")
        _write(self.dir / "names.json", json.dumps(names).encode())
        return names

    def namelist(self) -> list[str]:
        """Every member name of the wheel (of a source archive: every ``.py`` file of the package)."""
        if self._names is None:
            listing = self.dir / "names.json"
            if self._local is not None:
                self._names = self._local.namelist()
            elif listing.is_file():
                self._names = json.loads(listing.read_text())
            else:
                ranged = self._fetch()
                if ranged is not None:
                    self._names = ranged.namelist()
                    _write(listing, json.dumps(self._names).encode())
        assert self._names is not None
        return self._names

    def read(self, name: str) -> bytes:
        """The bytes of member ``name`` (KeyError when the release has none)."""
        if self._local is not None:
            return self._local.read(name)
        cached = self.dir / "files" / name
        if cached.is_file():
            return cached.read_bytes()
        if name not in self.namelist():
            raise KeyError(name)
        if cached.is_file():  # a source archive, unpacked by namelist()
            return cached.read_bytes()
        ranged = self._fetch()
        if ranged is None:
            raise KeyError(name)
        data = ranged.read(name)
        _write(cached, data)
        return data

    def close(self) -> None:
        for z in (self._local, self._ranged):
            if z is not None:
                z.close()

    def __enter__(self) -> ReleaseFiles:
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
