"""Human-readable seconds and bytes for tables and sentences."""

from __future__ import annotations


def fmt_seconds(s: float | None) -> str:
    """0.000012 -> '12.0 us', 0.0123 -> '12.3 ms', 1.5 -> '1.50 s'."""
    if s is None:
        return "-"
    a = abs(s)
    if a < 1e-3:
        return f"{s * 1e6:.1f} us"
    if a < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_bytes(n: float | None) -> str:
    """Binary units: 1536 -> '1.5 KiB'."""
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if abs(n) < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


_SUFFIXES = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "GIB": 1 << 30,
}


def parse_bytes(text: str) -> int:
    """'16M', '1GiB', '4096' -> bytes (binary multiples)."""
    raw = text.strip().upper()
    digits = raw.rstrip("KMGIB")
    suffix = raw[len(digits) :]
    if suffix not in _SUFFIXES or not digits:
        raise ValueError(f"not a byte size: {text!r} (e.g. 4096, 64K, 16M, 1G)")
    return int(float(digits) * _SUFFIXES[suffix])
