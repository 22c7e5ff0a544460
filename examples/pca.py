"""Principal axes of many-column data: spmd's one-function form with ``finish``.

Every rank sums, in float64, its row count, its column sums and its scatter matrix X^T X; the sums over
the ranks give the mean and the covariance of the whole input, and ``finish`` its principal variances
(the eigenvalues of the covariance, largest first): what PCA starts from.

    spmd generate examples/pca.yaml && mpiexec -n 2 spmd run examples/pca.yaml
"""

import numpy as np

import spmd


def principal_axes(value, params):
    """The mean, covariance and principal variances, from [n, column sums, scatter matrix]."""
    n = value[0]
    d = int(round((-1 + np.sqrt(1 + 4 * (len(value) - 1))) / 2))
    sums, scatter = value[1:1 + d], value[1 + d:].reshape(d, d)
    mean = sums / n
    covariance = (scatter - n * np.outer(mean, mean)) / (n - 1)
    return {"rows": n, "mean": mean, "covariance": covariance,
            "principal_variances": np.linalg.eigvalsh(covariance)[::-1]}


@spmd.map_reduce(combine="sum", finish=principal_axes)
def scatter_matrix(block, xp, params):
    x = block.astype(xp.float64)
    return xp.concatenate([xp.asarray([x.shape[0]], dtype=xp.float64), x.sum(axis=0), (x.T @ x).ravel()])
