"""Atomic file output: write a temporary file in the same folder, then rename over the target."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a report is as readable as any file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """``write_bytes_atomic`` of ``text`` in UTF-8."""
    return write_bytes_atomic(path, text.encode())


def write_json_atomic(path: str | Path, data) -> Path:
    """``write_text_atomic`` of ``data`` as indented JSON."""
    return write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def fsync_file(path: str | Path) -> None:
    """Force a finished file to disk before it is renamed into place (a crash of the machine,
    not only of the process, then leaves the old file or the whole new one)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
