"""NVTX ranges for spmd's phases (the ``nvtx`` package, NVIDIA's maintained binding), so ``nsys profile`` shows them
beside the kernels: a range per repeat, and inside it one per phase, in the domain ``spmd``.

On with ``--nvtx``, or by itself when a profiler is attached (NVTX's injection: the domain is then a real one,
not the package's no-op stand-in); off otherwise, at the cost of one ``None`` check per phase.
"""

from __future__ import annotations

from .errors import ConfigError

DOMAIN = "spmd"
NO_NVTX = "the nvtx package is not installed (pip install nvtx; the cuda extras bring it)"


class Ranges:
    """Push and pop NVTX ranges in spmd's domain (with their message strings registered once)."""

    def __init__(self, domain):
        self._domain = domain
        self._attributes: dict[str, object] = {}

    def push(self, name: str) -> None:
        attributes = self._attributes.get(name)
        if attributes is None:
            attributes = self._attributes[name] = self._domain.get_event_attributes(message=name)
        self._domain.push_range(attributes)

    def pop(self) -> None:
        self._domain.pop_range()


def nvtx_ranges(asked: bool) -> tuple[Ranges | None, str]:
    """The ranges to emit and why: ``asked`` (``--nvtx``), or a profiler attached; (None, "off") otherwise.

    Raises:
        ConfigError: ``--nvtx`` without the nvtx package.
    """
    try:
        import nvtx
        from nvtx._lib.lib import DummyDomain
    except ImportError:
        if asked:
            raise ConfigError(f"--nvtx: {NO_NVTX}") from None
        return None, "off"
    domain = nvtx.get_domain(DOMAIN)
    attached = not isinstance(domain, DummyDomain)
    if attached:
        return Ranges(domain), "on: a profiler is attached" + (" (--nvtx)" if asked else "")
    if asked:  # no tool listens: the ranges cost a call each and go nowhere, as NVTX intends
        return Ranges(domain), "on (--nvtx; no profiler attached)"
    return None, "off"
