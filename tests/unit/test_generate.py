"""``spmd generate`` (spmd.io.generate): what it writes, its refusals, and the token data it makes for a
language model."""

import h5py
import numpy as np
import pytest

from spmd.core.errors import ConfigError
from spmd.io.generate import FOLLOW, generate, next_tokens, target_files
from spmd.workloads.reduce.workload import ReduceWorkload
from spmd.workloads.registry import job_config_from_dict


def cfg_for(tmp_path, **generate_keys):
    return job_config_from_dict(
        {
            "workload": "reduce",
            "input": {"path": str(tmp_path / "d.h5"), "dataset": "x"},
            "generate": {"shape": [1001], "seed": 5, **generate_keys},
        }
    )


def test_single_file_with_reference_attributes(tmp_path):
    cfg = cfg_for(tmp_path, shape=[1001, 3], dtype="float64", chunk_rows=100)
    assert generate(cfg, ReduceWorkload) == [cfg.input.path]
    with h5py.File(cfg.input.path) as f:
        d = f["x"]
        assert d.shape == (1001, 3) and d.dtype == np.float64 and d.chunks == (100, 3)
        x = d[...]
        np.testing.assert_allclose(d.attrs["sum"], x.sum(0), rtol=1e-13)
        np.testing.assert_allclose(d.attrs["m2"], ((x - x.mean(0)) ** 2).sum(0), rtol=1e-12)
        np.testing.assert_array_equal(d.attrs["max"], x.max(0))
        assert abs(x.mean() - 1.0) < 0.2 and 1.8 < x.std() < 2.2  # normal(loc=1, scale=2)
    assert generate(cfg, ReduceWorkload) == []  # up to date: skipped
    assert generate(cfg, ReduceWorkload, force=True) == [cfg.input.path]


def test_same_seed_same_data_other_seed_other_data(tmp_path):
    a, b, c = (cfg_for(tmp_path / n, seed=s) for n, s in (("a", 1), ("b", 1), ("c", 2)))
    for cfg in (a, b, c):
        (tmp_path / cfg.input.path).parent.mkdir(exist_ok=True)
        generate(cfg, ReduceWorkload)
    data = [h5py.File(cfg.input.path)["x"][...] for cfg in (a, b, c)]
    np.testing.assert_array_equal(data[0], data[1])
    assert not np.array_equal(data[0], data[2])


def test_glob_shards_are_numbered_and_split_over_ranks(tmp_path):
    cfg = job_config_from_dict(
        {
            "workload": "reduce",
            "input": {"shards": str(tmp_path / "s" / "p-*.h5")},
            "generate": {"shape": [103], "shards": 4, "distribution": "uniform"},
        }
    )
    targets = target_files(cfg, ReduceWorkload)
    assert [r for _, r in targets] == [26, 26, 26, 25]
    assert targets[3][0].endswith("p-003.h5")
    mine = [generate(cfg, ReduceWorkload, rank=r, size=3) for r in range(3)]
    assert mine == [[targets[0][0], targets[3][0]], [targets[1][0]], [targets[2][0]]]
    x = h5py.File(targets[1][0])["data"][...]
    assert x.min() >= -1.0 and x.max() < 3.0 and x.min() < 0.0  # uniform on [loc - scale, loc + scale)


def test_hdf5_lock_failure_says_how_to_fix_it(tmp_path, monkeypatch):
    import pytest

    from spmd.core.errors import InputError
    from spmd.io import hdf5

    path = tmp_path / "locked.h5"
    path.write_bytes(b"")

    def locked(*args, **kwargs):
        raise OSError("Unable to synchronously open file (unable to lock file, errno = 11)")

    monkeypatch.setattr(hdf5.h5py, "File", locked)
    with pytest.raises(InputError, match="HDF5_USE_FILE_LOCKING=FALSE"):
        hdf5.open_h5(str(path))


def test_an_input_with_no_values_and_a_shard_listed_twice_are_refused(tmp_path):
    """A (10, 0) dataset ended in a traceback (exit 1); a shard listed twice was counted twice and verified."""
    import h5py
    import pytest

    from spmd.core.errors import InputError
    from spmd.io.hdf5 import dataset_info, expand_shards

    with h5py.File(tmp_path / "e.h5", "w") as f:
        f.create_dataset("x", shape=(10, 0), dtype="float32")
    with pytest.raises(InputError, match=r"e.h5:x: empty dataset \(shape \(10, 0\)\)"):
        dataset_info(str(tmp_path / "e.h5"), "x", ("float32",), (1, 2))
    (tmp_path / "a.h5").write_bytes(b"")
    (tmp_path / "b.h5").symlink_to(tmp_path / "a.h5")
    assert expand_shards((str(tmp_path / "a.h5"),)) == [str(tmp_path / "a.h5")]
    for twice in ([tmp_path / "a.h5", tmp_path / "." / "a.h5"], [tmp_path / "a.h5", tmp_path / "b.h5"]):
        with pytest.raises(InputError, match="are the same file"):
            expand_shards(tuple(map(str, twice)))


def test_generated_tokens_follow_the_rule_and_are_refused_in_other_shapes(tmp_path):
    cfg = job_config_from_dict(
        {
            "workload": "reduce",
            "input": {"path": str(tmp_path / "t.h5"), "dataset": "x"},
            "generate": {"shape": [500, 40], "dtype": "int64", "distribution": "tokens", "vocab": 97, "seed": 2},
        }
    )
    from spmd.workloads.reduce.workload import ReduceWorkload

    generate(cfg, ReduceWorkload)
    with h5py.File(tmp_path / "t.h5") as f:
        x = f["x"][...]
    assert x.dtype == np.int64 and x.shape == (500, 40) and 0 <= x.min() and x.max() < 97
    follows = np.mean(x[:, 1:] == next_tokens(x[:, :-1], 97))
    assert abs(follows - (FOLLOW + (1 - FOLLOW) / 97)) < 0.02
    for generate_key in (
        {"shape": [10, 4], "distribution": "tokens", "vocab": 9},  # float32
        {"shape": [10, 4], "dtype": "int64", "vocab": 9},  # normal
        {"shape": [10, 4], "dtype": "int64", "distribution": "tokens"},  # no vocab
        {"shape": [10, 4, 2], "dtype": "int64", "distribution": "tokens", "vocab": 9},
        {"shape": [10, 4], "dtype": "int64", "distribution": "tokens", "vocab": 1},
    ):
        with pytest.raises(ConfigError, match="generate"):
            job_config_from_dict({"workload": "reduce", "input": {"path": "t.h5"}, "generate": generate_key})
