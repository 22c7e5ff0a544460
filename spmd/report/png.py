"""PNG figures without a display: whether matplotlib is there, and a figure's bytes carrying spmd's record."""

from __future__ import annotations

import io

from ..core.files import MARK

NO_MATPLOTLIB = "matplotlib is not installed (pip install 'spmd[plot]' adds it)"


def available() -> bool:
    """True when matplotlib can be imported (the ``plot`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def png_bytes(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": MARK})  # spmd's record (spmd.core.files)
    return buffer.getvalue()
