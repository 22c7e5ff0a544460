"""Stencil weights from a config, and the single-process reference the workload must equal.

Weights are applied as ``scipy.ndimage.correlate`` applies them (not flipped):
``out[i, j] = sum over (a, b) of w[a, b] * in[i + a - r, j + b - r]``, r the radius.
Boundary modes have scipy.ndimage's meaning: ``reflect`` (d c b a | a b c d | d c b a),
``constant`` (cval beyond the edge), ``wrap`` (a b c d | a b c d | a b c d).
"""

from __future__ import annotations

import numpy as np

from ...core.errors import ConfigError

LAPLACIAN_3 = [[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]
NUMPY_PAD_MODE = {"reflect": "symmetric", "wrap": "wrap", "constant": "constant"}


def stencil_weights(kernel, size: int, sigma: float) -> np.ndarray:
    """The (s, s) float64 weights named by ``params.kernel`` (and ``size``, ``sigma``).

    Raises:
        ConfigError: an unknown name, an even or non-square explicit filter, bad size/sigma.
    """
    if isinstance(kernel, str):
        if size < 1 or size % 2 == 0:
            raise ConfigError(f"params.size: an odd width >= 1 is needed, got {size}")
        if kernel == "box":
            return np.full((size, size), 1.0 / size**2)
        if kernel == "gaussian":
            if sigma <= 0:
                raise ConfigError(f"params.sigma: must be > 0, got {sigma}")
            x = np.arange(size) - size // 2
            g = np.exp(-0.5 * (x / sigma) ** 2)
            w = np.outer(g, g)
            return w / w.sum()
        if kernel == "laplacian":
            if size != 3:
                raise ConfigError(f"params.size: the laplacian is the 5-point 3x3 stencil; got size {size}")
            return np.array(LAPLACIAN_3)
        raise ConfigError(f"params.kernel: {kernel!r} is not box, gaussian, laplacian or a list of rows")
    w = np.asarray(kernel, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] % 2 == 0 or w.size == 0:
        raise ConfigError(
            f"params.kernel: explicit weights must be an odd square list of rows, got shape {list(w.shape)}"
        )
    if not np.isfinite(w).all():
        raise ConfigError("params.kernel: weights must be finite")
    return w


def reference_filter(field, weights: np.ndarray, boundary: str, cval: float, iterations: int, xp=np):
    """``iterations`` Jacobi applications of ``weights`` to the whole field, in float64 on
    ``xp``'s device: plain padding and shifted sums, independent of the distributed code."""
    r = weights.shape[0] // 2
    u = xp.asarray(field, dtype=xp.float64)
    h, w = u.shape
    for _ in range(iterations):
        pad = xp.pad(
            u, r, mode=NUMPY_PAD_MODE[boundary], **({"constant_values": cval} if boundary == "constant" else {})
        )
        out = xp.zeros_like(u)
        for a in range(2 * r + 1):
            for b in range(2 * r + 1):
                if weights[a, b] != 0:
                    out += float(weights[a, b]) * pad[a : a + h, b : b + w]
        u = out
    return u


def error_bound(weights: np.ndarray, iterations: int, dtype, max_abs: float) -> float:
    """Largest error a correct ``dtype`` computation may have against the float64 reference.

    Each step rounds a sum of ``taps`` terms (plus the weights' own rounding) and the later
    steps amplify earlier errors by at most sum|w|: ``2 (taps + 1) u t ||w||_1^t max|x0|``.
    """
    taps = int(np.count_nonzero(weights))
    u = np.finfo(dtype).eps / 2
    gain = float(np.abs(weights).sum())
    return 2 * (taps + 1) * u * iterations * max(gain, 1.0) ** iterations * max_abs + np.finfo(np.float64).tiny
