"""The persistent compile cache: one folder of verified entries shared by every process.

An entry is a file `<root>/<namespace>/<digest>.jce`, where the digest is the SHA-256 of the
entry's key text (everything the compiled code depends on; the callers build it). The file
holds a header line and the payload:

    jitc-cache 1 {"key": <digest>, "meta": {...}, "blobs": [sizes], "sha256": <of the rest>}\\n
    <meta-free payload: the blobs, one after the other>

Reading checks the magic and format version, that the header names the key asked for (a file
copied or renamed into place is foreign), the blob sizes and the SHA-256 of the header's meta
and of every payload byte: a damaged, truncated, foreign or older-format entry is deleted and
reported as a miss, so the caller compiles again and writes a good one. Nothing is loaded
unverified.

Writes go to a private temporary file in the same folder, renamed over the entry with
`os.replace`: readers see the old file or the new one, never a part, and two processes writing
the same key both leave a complete entry (the last rename wins; both are equal). No locks.

The total size is bounded (`JITC_CACHE_MAX_MB`, options.cache_max_bytes): each hit sets the
entry's modification time to now (its last use: we keep the time ourselves rather than trust
atime, which most mounts update lazily or never), and when this process has written more than a
twentieth of the bound since it last looked, it lists the folder and deletes the least recently
used entries until the total is under nine tenths of the bound. Several processes writing at
once may overshoot by a twentieth each before one of them looks.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jitc.options import cache_dir, cache_max_bytes

MAGIC = b"jitc-cache "
FORMAT = 1
SUFFIX = ".jce"
# Temporary files older than this are left over by a process that died while writing.
STALE_SECONDS = 3600.0
# Folders of the cache root that hold entries; `clear` touches nothing else.
NAMESPACES = ("cpu", "routines", "c")
# What an older jitc kept in "routines": the objects with their SHA-256 appended.
LEGACY_SUFFIX = ".o"


@dataclass(frozen=True)
class Entry:
    meta: dict[str, Any]
    blobs: list[bytes]


def root() -> Path | None:
    """The cache folder, or None when the cache is turned off (options.cache_dir)."""
    folder = cache_dir()
    return None if folder is None else Path(folder)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _path(folder: Path, namespace: str, key_digest: str) -> Path:
    assert namespace in NAMESPACES, namespace
    return folder / namespace / f"{key_digest}{SUFFIX}"


def _checksum(meta_text: bytes, blobs: Sequence[bytes]) -> str:
    check = hashlib.sha256(meta_text)
    for blob in blobs:
        check.update(blob)
    return check.hexdigest()


def get(namespace: str, key: str) -> Entry | None:
    """The verified entry stored under `key`, or None (a miss: none, or not a good one)."""
    folder = root()
    if folder is None:
        return None
    key_digest = digest(key)
    path = _path(folder, namespace, key_digest)
    try:
        with open(path, "rb") as f:
            stored = f.read()
    except OSError:
        return None
    entry = _decode(stored, key_digest)
    if entry is None:
        _remove(path)  # rebuilt by the caller's compile; never tried again meanwhile
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # its last use, for the eviction order
    return entry


def _decode(stored: bytes, key_digest: str) -> Entry | None:
    end = stored.find(b"\n")
    if not stored.startswith(MAGIC) or end < 0:
        return None
    version, _, header_text = stored[len(MAGIC):end].partition(b" ")
    try:
        if int(version) != FORMAT:
            return None
        header = json.loads(header_text)
        sizes = [int(n) for n in header["blobs"]]
        meta_text = json.dumps(header["meta"], sort_keys=True).encode()
        if header["key"] != key_digest or sum(sizes) != len(stored) - end - 1:
            return None
    except (ValueError, KeyError, TypeError):
        return None
    blobs, offset = [], end + 1
    for size in sizes:
        blobs.append(stored[offset:offset + size])
        offset += size
    if _checksum(meta_text, blobs) != header.get("sha256"):
        return None
    return Entry(header["meta"], blobs)


def put(namespace: str, key: str, meta: dict[str, Any], blobs: Sequence[bytes]) -> None:
    """Store an entry (atomically); a cache that cannot be written is only a missed saving."""
    folder = root()
    if folder is None:
        return
    key_digest = digest(key)
    path = _path(folder, namespace, key_digest)
    meta_text = json.dumps(meta, sort_keys=True).encode()
    header = {"key": key_digest, "meta": meta, "blobs": [len(b) for b in blobs],
              "sha256": _checksum(meta_text, blobs)}
    head = MAGIC + f"{FORMAT} ".encode() + json.dumps(header).encode() + b"\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{key_digest[:16]}.",
                                         suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(head)
                for blob in blobs:
                    f.write(blob)
            os.replace(temporary, path)
        except BaseException:
            _remove(Path(temporary))
            raise
    except OSError:
        return
    _note_written(folder, len(head) + sum(len(b) for b in blobs))


_written_lock = threading.Lock()
_written_since_scan: dict[Path, int] = {}


def _note_written(folder: Path, size: int) -> None:
    limit = cache_max_bytes()
    with _written_lock:
        written = _written_since_scan.get(folder, limit) + size  # first write: look
        due = written > limit // 20
        _written_since_scan[folder] = 0 if due else written
    if due:
        evict(folder, limit)


@dataclass
class _File:
    path: Path
    size: int
    used: float


def _files(folder: Path) -> list[os.DirEntry]:
    """The files of every namespace folder under `folder` (missing folders have none)."""
    found = []
    for namespace in NAMESPACES:
        with contextlib.suppress(OSError):
            found.extend(os.scandir(folder / namespace))
    return found


def _entries(folder: Path) -> list[_File]:
    """Every entry under `folder`; stale temporary files are deleted on the way."""
    found = []
    now = time.time()
    for item in _files(folder):
        try:
            stat = item.stat()
        except OSError:  # deleted meanwhile by another process
            continue
        if item.name.endswith(SUFFIX):
            found.append(_File(Path(item.path), stat.st_size, stat.st_mtime))
        elif item.name.endswith(".tmp") and now - stat.st_mtime > STALE_SECONDS:
            _remove(Path(item.path))
    return found


def evict(folder: Path, limit: int) -> int:
    """Delete least recently used entries until the total is at most nine tenths of `limit`
    (when it is over `limit`); returns how many were deleted."""
    entries = _entries(folder)
    total = sum(e.size for e in entries)
    if total <= limit:
        return 0
    deleted = 0
    for entry in sorted(entries, key=lambda e: e.used):
        if total <= limit * 9 // 10:
            break
        _remove(entry.path)  # a process that has it open or mapped keeps its copy
        total -= entry.size
        deleted += 1
    return deleted


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def info() -> dict[str, Any]:
    """Location, limit, and entries and bytes per namespace and in all."""
    folder = root()
    result: dict[str, Any] = {"location": None if folder is None else str(folder),
                              "enabled": folder is not None, "limit_bytes": cache_max_bytes(),
                              "entries": 0, "bytes": 0, "namespaces": {}}
    if folder is None:
        return result
    for entry in _entries(folder):
        namespace = entry.path.parent.name
        counts = result["namespaces"].setdefault(namespace, {"entries": 0, "bytes": 0})
        counts["entries"] += 1
        counts["bytes"] += entry.size
        result["entries"] += 1
        result["bytes"] += entry.size
    return result


def clear() -> int:
    """Delete every entry (and temporary file) of the cache; returns the entries deleted."""
    folder = root()
    if folder is None:
        return 0
    deleted = 0
    for item in _files(folder):
        if item.name.endswith((SUFFIX, ".tmp", LEGACY_SUFFIX)):
            _remove(Path(item.path))
            deleted += item.name.endswith(SUFFIX)
    return deleted


@functools.cache
def code_identity() -> str:
    """jitc's version and a hash of its source: part of every key, so that a changed compiler
    (a new release, or an edit of a checkout) never loads code an older one made."""
    import jitc
    package = Path(jitc.__file__).resolve().parent
    check = hashlib.sha256(jitc.__version__.encode())
    for source in sorted(package.rglob("*.py")):
        check.update(str(source.relative_to(package)).encode())
        check.update(source.read_bytes())
    return f"jitc {jitc.__version__} {check.hexdigest()}"


__all__ = ["Entry", "clear", "code_identity", "digest", "evict", "get", "info", "put", "root"]
