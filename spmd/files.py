"""Atomic file output: write a temporary file of a unique name in the same folder, then rename it over
the target, so a reader sees the old file or the whole new one, and two jobs writing one path at once
never share a temporary file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .errors import InputError

RESERVE_SLACK = 64 << 10  # room for an HDF5 file's metadata beyond its data


def temp_beside(path: str | Path) -> Path:
    """A new empty file of a unique name in ``path``'s folder (made if missing), as readable as any
    file the user makes: where ``path`` is written before ``publish`` renames it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600
    finally:
        os.close(fd)
    return Path(tmp)


def publish(tmp: str | Path, path: str | Path) -> None:
    """Force the finished ``tmp`` to disk and rename it over ``path`` (a crash of the machine, not only
    of the process, then leaves the old file or the whole new one)."""
    fsync_file(tmp)
    os.replace(tmp, path)


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    tmp = temp_beside(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        publish(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(path)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """``write_bytes_atomic`` of ``text`` in UTF-8."""
    return write_bytes_atomic(path, text.encode())


def write_json_atomic(path: str | Path, data) -> Path:
    """``write_text_atomic`` of ``data`` as indented JSON."""
    return write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def reserve(path: str | Path, extra_bytes: int) -> None:
    """Allocate disk blocks for ``extra_bytes`` more (plus room for metadata) at the end of ``path`` now,
    so a full disk or a quota is an OSError here, before anything is written (HDF5 meeting a full disk
    while it closes a file crashes the process: seen, exit 11)."""
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size + extra_bytes + RESERVE_SLACK)
    finally:
        os.close(fd)


def require_writable_folder(folder: str | Path, what: str) -> None:
    """Refuse (InputError) a folder that cannot take this process's output, before the work: a path
    through a regular file, a read-only or full file system. Nothing is left behind: a folder that does
    not exist yet is judged by its nearest existing parent, probed with a small synced file, removed."""
    folder = Path(folder)
    existing = next(p for p in (folder, *folder.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        raise InputError(f"{what} {folder}: {existing} exists and is not a folder")
    probe = None
    try:
        probe = temp_beside(existing / ".spmd-write-probe")
        with open(probe, "wb") as f:
            f.write(bytes(4096))
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise InputError(f"{what} {folder}: cannot write there ({exc.strerror or exc})") from None
    finally:
        if probe is not None:
            probe.unlink(missing_ok=True)


def fsync_file(path: str | Path) -> None:
    """Force a finished file to disk before it is renamed into place."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
