"""spmd's file output: never over a file spmd did not write, never half-written, never colliding.

Ownership: every file spmd writes carries its record (``MARK`` near the top of a text file or a PNG's text chunk,
``"spmd_version"`` near the top of a JSON file, scaling.csv's own header, the ``spmd_record`` attribute of an HDF5 file,
``MARK`` in the pickle of a torch.save archive), and a path that exists is replaced only when it carries one
(``require_replaceable``): a user's file, one that cannot be read, a read-only file or a symbolic link is refused with
exit 2 naming it, unless the caller was told ``overwrite``.

Atomicity: a temporary file of a unique name in the same folder, fsynced, renamed over the target, so a
reader sees the old file or the whole new one, and two jobs writing one path at once never share a
temporary file. A temporary file is named after its host and process (``.NAME.HOST-PID.XXXX.tmp``): this
process removes its own on every ending that runs a handler (an exception, SIGTERM, the watchdog ending
the job: ``remove_own_temps``), and the next writer of the folder removes those of processes of its host
that no longer exist (a rank killed with SIGKILL).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
import socket
import stat
import tempfile
import zipfile
import zlib
from pathlib import Path

from .errors import InputError, brief, one_line
from .units import fmt_bytes
from .version import __version__

RESERVE_SLACK = 64 << 10  # room for an HDF5 file's metadata beyond its data
MARK = f"written by spmd {__version__}"  # in the head of every text file and PNG spmd writes
_MARKS = (b"written by spmd", b'"spmd_version": "', b"series,ranks,nodes,link_class,")  # text/PNG, JSON, CSV
HDF5_RECORD = "spmd_record"  # the root attribute of every HDF5 file spmd writes
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ZIP_SIGNATURE = b"PK\x03\x04"  # torch.save's archive (params.save of workload torch)
GZIP_SIGNATURE = b"\x1f\x8b"  # a captured trace (kernels/rankR.trace.json.gz)
MAX_PICKLE_BYTES = 64 << 20
HEAD_BYTES = 64 << 10  # where a record must be found in a text file
_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:40] or "host"
_TEMP = re.compile(r"\.(?P<name>.+)\.(?P<host>[A-Za-z0-9_-]+)-(?P<pid>\d+)\.[^.]+\.tmp")
_own_temps: set[Path] = set()  # this process's temporary files not yet renamed or removed


# -- ownership ---------------------------------------------------------------------------------------


def spmd_record(path: str | Path) -> bool:
    """Whether the regular file at ``path`` carries spmd's record (see the module's docstring); False for a
    file that cannot be read or parsed."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return False
    if head.startswith(HDF5_SIGNATURE):
        return hdf5_writer(path) is not None
    if head.startswith(ZIP_SIGNATURE):
        return torch_save_record(path)
    if head.startswith(GZIP_SIGNATURE):  # a captured trace: its record leads the JSON inside
        try:
            with gzip.open(path, "rb") as f:
                head = f.read(HEAD_BYTES)
        except (OSError, EOFError, zlib.error):
            return False
    return any(mark in head for mark in _MARKS)


def torch_save_record(path: str | Path) -> bool:
    """Whether a torch.save archive (a zip) holds spmd's record in its pickle (``data.pkl``: the state_dict's
    metadata, ``spmd_record``); read with zipfile, never unpickled."""
    try:
        with zipfile.ZipFile(path) as archive:
            pickles = [info for info in archive.infolist() if info.filename.endswith("/data.pkl")]
            if len(pickles) != 1 or pickles[0].file_size > MAX_PICKLE_BYTES:
                return False
            return _MARKS[0] in archive.read(pickles[0])
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def hdf5_writer(path: str | Path) -> str | None:
    """The spmd command that wrote the HDF5 file at ``path`` ('spmd generate', 'spmd run'), from its record;
    files written before records count by their older marks: a generated input's recipe (``spmd_generate``
    on a dataset), a training checkpoint's checksums. None: not spmd's, or not readable as HDF5."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            record = f.attrs.get(HDF5_RECORD)
            if record is not None:
                return json.loads(record).get("command")
            if {"format", "meta", "sha256"} <= set(f.attrs):
                return "spmd run"
            items = (f.get(name) for name in list(f)[:100])
            if any(isinstance(item, h5py.Dataset) and "spmd_generate" in item.attrs for item in items):
                return "spmd generate"
    except Exception:  # not readable as HDF5, or a record that is not ours: not spmd's
        return None
    return None


def hdf5_record(command: str, **details) -> str:
    """The text of an HDF5 file's ``spmd_record`` attribute: who wrote it, and what it is."""
    return json.dumps({"written_by": f"spmd {__version__}", "command": command, **details}, sort_keys=True)


def require_replaceable(
    path: str | Path, what: str | None = None, overwrite: bool = False, fix: str = "remove it or choose another path"
) -> None:
    """Refuse (InputError, exit 2) to write ``path`` unless it is missing or a file spmd wrote.

    Args:
        what: how the message names the file's role (default: the path alone).
        overwrite: the user allowed replacing a regular file that is not spmd's (config ``overwrite: true``).
        fix: what the message tells the user to do.
    """
    path = Path(path)
    name = one_line(f"{what} {path}" if what else str(path))
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(f"{name}: cannot check it ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode):
        target = one_line(os.readlink(path))
        raise InputError(
            f"{name} is a symbolic link (to {brief(target)[1:-1]}): spmd replaces only files it "
            f"wrote, never a link; {fix}"
        )
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{name} exists and is a folder: {fix}")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{name} exists and is not a regular file: {fix}")
    if not info.st_mode & 0o222 or not os.access(path, os.W_OK):  # the mode bits: root may write anything
        raise InputError(f"{name} is read-only: spmd does not replace it; {fix}")
    if not overwrite and not spmd_record(path):
        raise InputError(f"{name} exists and was not written by spmd: {fix}")


# -- temporary files -----------------------------------------------------------------------------------


def require_replaceable_paths(*paths) -> None:
    """Refuse, before any measurement, an output path (``--json``, ``--png``) holding a file spmd did not write."""
    for path in paths:
        if path is not None:
            require_replaceable(path)


def temp_beside(path: str | Path) -> Path:
    """A new empty file of a unique name in ``path``'s folder (made if missing), as readable as any
    file the user makes: where ``path`` is written before ``publish`` renames it. Stale temporary files
    of ``path`` (their process, on this host, is gone) are removed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_HOST}-{os.getpid()}.", suffix=".tmp", dir=path.parent)
    _own_temps.add(Path(tmp))
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600
    finally:
        os.close(fd)
    return Path(tmp)


def discard(tmp: str | Path) -> None:
    """Remove a temporary file of this process (missing is fine)."""
    _own_temps.discard(Path(tmp))
    Path(tmp).unlink(missing_ok=True)


def remove_own_temps() -> None:
    """Remove every temporary file this process made and has not renamed: an ending that runs no
    ``finally`` (SIGTERM, the watchdog aborting the job) calls it. Never raises."""
    for tmp in list(_own_temps):
        try:
            discard(tmp)
        except OSError:
            pass


def remove_stale_temps(path: str | Path) -> list[Path]:
    """Remove the temporary files of ``path`` left by processes of this host that no longer exist
    (a writer killed before it could remove its own). Another host's, or a live process's, are kept.
    Returns the paths removed."""
    path = Path(path)
    removed = []
    try:
        names = [e.name for e in os.scandir(path.parent) if e.name.startswith(f".{path.name}.")]
    except OSError:
        return removed
    for name in names:
        match = _TEMP.fullmatch(name)
        if not match or match["name"] != path.name or match["host"] != _HOST or _alive(int(match["pid"])):
            continue
        try:
            (path.parent / name).unlink()
            removed.append(path.parent / name)
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


# -- writing -------------------------------------------------------------------------------------------


def publish(tmp: str | Path, path: str | Path, overwrite: bool = False) -> None:
    """Force the finished ``tmp`` to disk and rename it over ``path`` (a crash of the machine, not only
    of the process, then leaves the old file or the whole new one); refused (``require_replaceable``)
    where ``path`` is not spmd's to replace."""
    require_replaceable(path, overwrite=overwrite)
    fsync_file(tmp)
    os.replace(tmp, path)
    _own_temps.discard(Path(tmp))


def write_bytes_atomic(path: str | Path, data: bytes, overwrite: bool = False, what: str = "it") -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one. A file that cannot
    be written (a full disk, a quota, a folder in the way) is an InputError naming it, ``what`` it is, and
    the cause."""
    tmp = None
    try:
        require_replaceable(path, overwrite=overwrite)
        tmp = temp_beside(path)
        with open(tmp, "wb") as f:
            f.write(data)
        publish(tmp, path, overwrite)
    except OSError as exc:
        raise InputError(f"{one_line(str(path))}: cannot write {what} ({exc.strerror or exc})") from None
    finally:
        if tmp is not None and tmp in _own_temps:
            discard(tmp)
    return Path(path)


def write_files_atomic(files: list[tuple[Path, bytes, int]]) -> list[Path]:
    """Write every (path, bytes, file mode before the umask) as one set: each to its temporary file first, then, only
    once all are written, each renamed into place, so a full disk half-way leaves none of them changed. Every target
    must be spmd's to replace (checked before anything is written). InputError naming the file that failed."""
    for path, _, _ in files:
        require_replaceable(path)
    made = sorted(
        {folder for path, _, _ in files for folder in Path(path).absolute().parents if not folder.exists()},
        key=lambda folder: len(folder.parts),
        reverse=True,
    )  # removed again, deepest first, on a failure
    temps: list[Path] = []
    try:
        for path, data, mode in files:
            temps.append(temp_beside(path))
            with open(temps[-1], "wb") as f:
                f.write(data)
            os.chmod(temps[-1], mode & ~_umask())
            fsync_file(temps[-1])
        for (path, _, _), tmp in zip(files, temps):
            publish(tmp, path)
    except OSError as exc:
        failed = files[len(temps) - 1][0] if temps else files[0][0]
        for tmp in temps:
            discard(tmp)
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise InputError(
            f"{one_line(str(failed))}: cannot write it ({exc.strerror or exc}); none of the "
            f"{len(files)} file(s) was changed"
        ) from None
    finally:
        for tmp in temps:
            if tmp in _own_temps:
                discard(tmp)
    return [path for path, _, _ in files]


def write_text_atomic(path: str | Path, text: str, overwrite: bool = False) -> Path:
    """``write_bytes_atomic`` of ``text`` in UTF-8."""
    return write_bytes_atomic(path, text.encode(), overwrite)


def json_text(data: dict) -> str:
    """``data`` as strict, indented JSON carrying spmd's record (``spmd_version`` first, unless it has
    one): NaN and infinity, which JSON does not have, become null."""
    if "spmd_version" not in data:
        data = {"spmd_version": __version__, **data}
    return json.dumps(finite_or_null(data), indent=2, allow_nan=False) + "\n"


def finite_or_null(value):
    """``value`` with every float that is NaN or infinite replaced by None (JSON's null)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


def write_json_atomic(path: str | Path, data: dict, overwrite: bool = False) -> Path:
    """``write_text_atomic`` of ``json_text(data)``."""
    return write_text_atomic(path, json_text(data), overwrite)


def reserve(path: str | Path, extra_bytes: int) -> None:
    """Allocate disk blocks for ``extra_bytes`` more (plus room for metadata) at the end of ``path`` now,
    so a full disk or a quota is an OSError here, before anything is written (HDF5 meeting a full disk
    while it closes a file crashes the process: seen, exit 11)."""
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size + extra_bytes + RESERVE_SLACK)
    finally:
        os.close(fd)


def require_space(files: list[tuple[str, int]], doing: str) -> None:
    """Refuse (InputError) ``files`` ((path, bytes) to write) that their file systems cannot take now."""
    needed: dict[int, list] = {}  # file system -> [a folder on it, bytes, files]
    for path, nbytes in files:
        folder = next(p for p in Path(path).absolute().parents if p.is_dir())
        entry = needed.setdefault(os.stat(folder).st_dev, [folder, 0, 0])
        entry[1] += nbytes
        entry[2] += 1
    for folder, nbytes, count in needed.values():
        info = os.statvfs(folder)
        free = info.f_bavail * info.f_frsize
        if nbytes > free:
            raise InputError(
                f"{doing} {count} file(s) needs {fmt_bytes(nbytes)}, the file system of "
                f"{one_line(folder)} has {fmt_bytes(free)} free: refused before writing anything"
            )


def require_writable_folder(folder: str | Path, what: str) -> None:
    """Refuse (InputError) a folder that cannot take this process's output, before the work: a path
    through a regular file, a read-only or full file system. Nothing is left behind: a folder that does
    not exist yet is judged by its nearest existing parent, probed with a small synced file, removed."""
    folder = Path(folder)
    name = one_line(f"{what} {folder}")
    existing = next(p for p in (folder, *folder.parents) if os.path.lexists(p) or p == Path(p.anchor))
    if existing.is_symlink() and not existing.exists():
        raise InputError(
            f"{name}: {one_line(existing)} is a symbolic link to {brief(one_line(os.readlink(existing)))}, "
            f"which does not exist"
        )
    if not existing.is_dir():
        raise InputError(f"{name}: {one_line(existing)} exists and is not a folder")
    probe = None
    try:
        probe = temp_beside(existing / ".spmd-write-probe")
        with open(probe, "wb") as f:
            f.write(bytes(4096))
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise InputError(f"{name}: cannot write there ({exc.strerror or exc})") from None
    finally:
        if probe is not None:
            discard(probe)


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
