"""Loading a plug-in workload named by the config, as ``workload: path/to/file.py:NAME`` (a file, relative to
the working directory) or ``workload: package.module:NAME`` (importable from PYTHONPATH).

NAME is a subclass of ``spmd.Workload`` or a function decorated with ``@spmd.map_reduce``. Every rank
loads it (the CLI does so inside ``Context.agree``): a missing file or module, one that fails to import,
or a missing or unusable NAME is a ConfigError naming the path and the name. A file is loaded once per
process, under a module name of its own, so its dataclasses and type hints resolve as in any module.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path

from ..core.errors import ConfigError, SpmdError, brief, one_line
from .base import Workload

FORMS = "path/to/file.py:NAME or package.module:NAME"
_USER_CODE: set[Path] = set()  # the files and package folders of the plug-ins loaded in this process


def is_plugin(name) -> bool:
    """Whether the config's ``workload`` names a plug-in rather than a built-in."""
    return isinstance(name, str) and ":" in name


def load_object(spec, key: str = "workload"):
    """The object ``spec`` (``path/file.py:NAME`` or ``package.module:NAME``) names, its code noted as the user's;
    ConfigErrors name the config ``key``, the path and the name."""
    if not isinstance(spec, str):
        raise ConfigError(f"{key}: {brief(spec)}: expected {FORMS}")
    where, _, attr = spec.rpartition(":")
    if not where or not attr.isidentifier():
        raise ConfigError(f"{key}: {brief(spec)}: expected {FORMS}")
    from_file = where.endswith(".py") or "/" in where
    module = _from_file(where, key) if from_file else _from_module(where, key)
    if not hasattr(module, attr):
        names = sorted(n for n in vars(module) if not n.startswith("_"))
        raise ConfigError(f"{key}: {where} has no {attr} (it has: {', '.join(names[:12]) or 'nothing'})")
    origin = Path(module.__file__).resolve() if getattr(module, "__file__", None) else None
    if origin is not None:  # a module's whole top-level package is the user's code
        top = sys.modules.get(module.__name__.partition(".")[0])
        package = getattr(top, "__path__", None) if not from_file else None
        _USER_CODE.add(Path(list(package)[0]).resolve() if package else origin)
    return getattr(module, attr)


def load_plugin(spec: str) -> type[Workload]:
    """The Workload class that ``spec`` names (a @map_reduce function gives the class it made)."""
    where, _, attr = spec.rpartition(":")
    found = load_object(spec)
    cls = getattr(found, "__spmd_workload__", found)
    if not (isinstance(cls, type) and issubclass(cls, Workload)):
        raise ConfigError(
            f"workload: {where}:{attr} is a {type(found).__name__}, not a subclass of spmd.Workload "
            f"or a function decorated with @spmd.map_reduce"
        )
    return cls


def _from_file(where: str, key: str):
    path = Path(where)
    if path.is_dir():
        raise ConfigError(f"{key}: {one_line(where)} is a folder, not a Python file")
    if not path.is_file():
        why = "not a regular file" if path.exists() else "no such file (paths are taken from the working directory)"
        raise ConfigError(f"{key}: {one_line(where)}: {why}")
    name = "spmd_plugin_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    except SpmdError:  # spmd's own (the import ran out of time): as it is
        del sys.modules[name]
        raise
    except (Exception, SystemExit) as exc:  # sys.exit at import is a failed import, not the job's end
        del sys.modules[name]
        raise ConfigError(f"{key}: importing {one_line(where)} failed: {located(exc, path)}") from None
    return module


def _from_module(where: str, key: str):
    try:
        return importlib.import_module(where)
    except SpmdError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and where.startswith(exc.name):
            raise ConfigError(f"{key}: no module {where} on the Python path (PYTHONPATH)") from None
        raise ConfigError(f"{key}: importing {where} failed: {located(exc, None)}") from None
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"{key}: importing {where} failed: {located(exc, None)}") from None


def located(exc: BaseException, path: Path | None) -> str:
    """'TypeError: message (file.py:12)': the error, where in the plug-in's code it happened."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}:{exc.lineno})"
    if isinstance(exc, SystemExit):
        exc_text = f"it called sys.exit({brief(exc.code)})"
    else:
        exc_text = f"{type(exc).__name__}: {brief(str(exc))[1:-1]}"
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [
        f
        for f in frames
        if (Path(f.filename).resolve() == path.resolve() if path is not None else _is_user_code(Path(f.filename)))
    ]
    frames = mine or frames
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{one_line(exc_text)}{where}"


def plugin_frame(exc: BaseException) -> str | None:
    """'Class.method, file.py:12': the innermost frame of ``exc``'s traceback in a loaded plug-in's code
    (where the user's code went wrong), or None when the exception did not pass through it."""
    found = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if _is_user_code(Path(frame.f_code.co_filename)):
            found = f"{frame.f_code.co_qualname}, {frame.f_code.co_filename}:{line}"
    return found


def _is_user_code(path: Path) -> bool:
    return any(path == p or p in path.parents for p in _USER_CODE)
