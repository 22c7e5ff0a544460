"""YAML from a user, read and parsed safely: the text of a regular file of at most ``MAX_CONFIG_BYTES`` of UTF-8
(a FIFO would block every rank), and a document in which a key given twice is refused and aliases may not expand
beyond ``MAX_NODES`` nodes, nest deeper than ``MAX_DEPTH`` or refer to themselves. Configs and ``spmd predict``'s
targets are read through it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from .errors import ConfigError, brief, one_line

MAX_CONFIG_BYTES = 1 << 20  # a config is a page of settings; 1 MiB is far beyond any real one
MAX_NODES = 100_000  # YAML nodes after expanding aliases
MAX_DEPTH = 64


def read_config_text(path: str | Path) -> str:
    """The text of the config file at ``path``: a regular file (a FIFO would block every rank), at most
    MAX_CONFIG_BYTES, UTF-8."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"config {path}: not a regular file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"config {path}: {info.st_size} bytes, more than a config may have ({MAX_CONFIG_BYTES} bytes)"
            )
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config {path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config {path}: more than a config may have ({MAX_CONFIG_BYTES} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config {path}: not UTF-8 text (byte {exc.start}: {brief(data[exc.start : exc.start + 4])})"
        ) from None


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that gives one key twice (YAML forbids it; PyYAML
    would keep the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class refuses it with its own message
                break
            if repeated:
                raise ConfigError(
                    f"key {brief(key)} appears twice in one mapping (line {key_node.start_mark.line + 1})"
                )
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, what: str):
    """``yaml.safe_load`` of ``text``, refusing duplicate keys and documents that aliases blow up."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, what)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what}: not valid YAML: {_yaml_problem(exc)}") from None
    except ConfigError as exc:
        raise ConfigError(f"{what}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{what}: nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # a value PyYAML cannot build (an integer of 5,000 digits)
        raise ConfigError(f"{what}: a value that cannot be read: {one_line(exc)[:200]}") from None
    finally:
        loader.dispose()


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's complaint on one line: what is wrong and where (its own text spans lines, with a caret)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return one_line(problem)[:200] + where


def _check_size(root, what: str) -> None:
    """Refuse a YAML node graph deeper than MAX_DEPTH, referring to itself, or larger than MAX_NODES
    once every alias is expanded (what building the config would do)."""
    sizes: dict[int, int] = {}
    path: set[int] = set()

    def size(node, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in path:
            raise ConfigError("an alias refers to the node that holds it (a recursive config)")
        if depth > MAX_DEPTH:
            raise ConfigError(f"nested more than {MAX_DEPTH} levels deep")
        path.add(key)
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_NODES:
                raise ConfigError(f"more than {MAX_NODES} values once its aliases are expanded")
        path.discard(key)
        sizes[key] = total
        return total

    size(root, 0)
