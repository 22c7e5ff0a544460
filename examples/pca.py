"""Principal axes of many-column data: spmd's one-function form with ``finish``.

Every rank sums, in float64, its row count, its column sums and its scatter matrix X^T X, all in one
product, [1 x]^T [1 x]; the sums over the ranks give the mean and the covariance of the whole input, and
``finish`` its principal variances (the eigenvalues of the covariance, largest first): what PCA starts from.

    spmd generate examples/pca.yaml && mpiexec -n 2 spmd run examples/pca.yaml
"""

import numpy as np

import spmd


def principal_axes(value, params):
    """The mean, covariance and principal variances, from [1 x]^T [1 x] (n, column sums, scatter matrix)."""
    n, sums, scatter = value[0, 0], value[0, 1:], value[1:, 1:]
    mean = sums / n
    covariance = (scatter - n * np.outer(mean, mean)) / (n - 1)
    return {
        "rows": n,
        "mean": mean,
        "covariance": covariance,
        "principal_variances": np.linalg.eigvalsh(covariance)[::-1],
    }


@spmd.map_reduce(combine="sum", finish=principal_axes)
def scatter_matrix(block, xp, params):
    # One product gives all three sums: a column of ones before the data makes [1 x]^T [1 x] hold the row
    # count, the column sums and X^T X (and on a GPU, cuBLAS beats CuPy's x.sum(axis=0) over tall columns).
    x1 = xp.empty((block.shape[0], block.shape[1] + 1), xp.float64)
    x1[:, 0] = 1
    x1[:, 1:] = block
    return x1.T @ x1
