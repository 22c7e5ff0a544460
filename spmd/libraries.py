"""The shared libraries this process has actually loaded (not what a search path would find)."""

from __future__ import annotations


def loaded_libraries(fragment: str) -> list[str]:
    """Sorted paths of the shared objects mapped into this process whose path holds ``fragment``
    (``/proc/self/maps``; empty where it cannot be read)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if fragment in line}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and ".so" in p)
