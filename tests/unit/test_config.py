import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from spmd.core.config import Config, apply_override, config_from_dict
from spmd.core.errors import ConfigError
from spmd.core.safe_yaml import parse_yaml
from spmd.workloads.registry import job_config_from_dict, load_job_config

BASE = {"workload": "reduce", "input": {"path": "data/x.h5", "dataset": "x"}}


def make(**changes):
    raw = {**BASE, **changes}
    return job_config_from_dict(raw)


def test_defaults_and_params():
    cfg = make(params={"ddof": 1})
    assert (
        cfg.device == "auto" and cfg.comm == "auto" and cfg.repeats is None and cfg.warmup == 1
    )  # run: 5, scale: auto
    assert cfg.max_seconds == 30.0 and make(repeats="auto").repeats == "auto"
    assert cfg.params.ddof == 1 and cfg.params.method == "auto"
    assert cfg.to_dict()["input"] == {"path": "data/x.h5", "dataset": "x", "shards": None}


def test_every_example_config_loads():
    from pathlib import Path

    configs = sorted(Path(__file__).parents[2].joinpath("inputs").glob("*.yaml"))
    assert configs
    for path in configs:
        assert isinstance(load_job_config(path), Config)


@pytest.mark.parametrize(
    "raw, key",
    [
        ({**BASE, "repeat": 3}, "unknown key repeat"),
        ({**BASE, "input": {"path": "a.h5", "datset": "x"}}, "unknown key input.datset"),
        ({**BASE, "params": {"dof": 1}}, "unknown key params.dof"),
        ({**BASE, "generate": {"shape": [4], "sed": 1}}, "unknown key generate.sed"),
        ({**BASE, "repeats": "five"}, "repeats: expected an integer or auto, got 'five'"),
        ({**BASE, "repeats": 0}, "repeats: must be >= 1 or auto"),
        ({**BASE, "max_seconds": 0}, "max_seconds: must be a positive number of seconds"),
        ({**BASE, "warmup": -1}, "warmup: must be >= 0"),
        ({**BASE, "device": "tpu"}, "device: 'tpu' is not one of"),
        ({**BASE, "comm": "gloo"}, "comm: 'gloo' is not one of"),
        ({**BASE, "allow_shared_gpu": "yes"}, "allow_shared_gpu: expected true or false"),
        ({**BASE, "params": {"ddof": -1}}, "params.ddof: must be >= 0"),
        ({**BASE, "params": {"ddof": 1.5}}, "params.ddof: expected an integer"),
        ({**BASE, "params": {"method": "magic"}}, "params.method"),
        ({**BASE, "generate": {"shape": [0]}}, "generate.shape: sizes must be positive"),
        ({**BASE, "generate": {"shape": [2, 2, 2, 2, 2, 2]}}, "generate.shape: 1 to 5 dimensions"),
        ({**BASE, "generate": {"shape": [4], "dtype": "int32"}}, "generate.dtype"),
        ({"workload": "reduce", "input": {"dataset": "x"}}, "exactly one of input.path or input.shards"),
        ({"workload": "reduce", "input": {"path": "a", "shards": ["b"]}}, "exactly one of"),
        ({"workload": "sort", "input": BASE["input"]}, "workload: unknown workload 'sort'"),
        ({"input": BASE["input"]}, "workload: missing"),
        ({"workload": "reduce"}, "input: missing"),
        ({**BASE, "input": "data.h5"}, "input: expected a mapping"),
    ],
)
def test_invalid_configs_name_the_key(raw, key):
    with pytest.raises(ConfigError, match=key.replace("(", r"\(").replace("[", r"\[")):
        job_config_from_dict(raw)


def test_shards_accept_one_glob_or_a_list():
    assert make(input={"shards": "d/*.h5"}).input.shards == ("d/*.h5",)
    assert make(input={"shards": ["a.h5", "b.h5"]}).input.shards == ("a.h5", "b.h5")


def test_overrides_parse_yaml_values(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(BASE))
    cfg = load_job_config(path, ["repeats=3", "params.ddof=1", "input.path=other.h5", "device=cpu"])
    assert (cfg.repeats, cfg.params.ddof, cfg.input.path, cfg.device) == (3, 1, "other.h5", "cpu")
    with pytest.raises(ConfigError, match="expected key=value"):
        load_job_config(path, ["repeats"])
    with pytest.raises(ConfigError, match="unknown key bogus"):
        load_job_config(path, ["bogus=1"])
    raw = {"input": "x"}
    with pytest.raises(ConfigError, match="not a mapping"):
        apply_override(raw, "input.path=y")


def test_unreadable_and_non_yaml_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_job_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: [reduce\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_job_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping of keys"):
        load_job_config(listy)


values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
keys = st.sampled_from(
    [
        "workload",
        "input",
        "device",
        "comm",
        "warmup",
        "repeats",
        "verify",
        "params",
        "generate",
        "output",
        "allow_shared_gpu",
        "timeout_s",
        "check_finite",
        "fault",
        "bogus",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values, max_size=8), st.booleans())
def test_fuzz_validator_returns_config_or_config_error(raw, add_valid_core):
    if add_valid_core:
        raw = {**BASE, **{k: v for k, v in raw.items() if k not in ("workload", "input")}}
    try:
        assert isinstance(job_config_from_dict(raw), Config)
    except ConfigError:
        pass


def _param_keys(workload: str) -> list[str]:
    import dataclasses

    from spmd.workloads.registry import params_class

    return [f.name for f in dataclasses.fields(params_class(workload))] + ["bogus"]


@st.composite
def workload_configs(draw):
    """A known workload with random values under its own params keys (and the new top-level keys)."""
    from spmd.workloads.registry import REGISTRY

    workload = draw(st.sampled_from(sorted(REGISTRY)))
    params = draw(st.dictionaries(st.sampled_from(_param_keys(workload)), values, max_size=4))
    extra = draw(
        st.dictionaries(st.sampled_from(["timeout_s", "check_finite", "fault", "repeats"]), values, max_size=2)
    )
    return {**BASE, "workload": workload, "params": params, **extra}


@settings(max_examples=300, deadline=None)
@given(workload_configs())
def test_fuzz_every_workloads_params(raw):
    try:
        assert isinstance(job_config_from_dict(raw), Config)
    except ConfigError:
        pass


fault_parts = st.one_of(
    st.sampled_from(
        [
            "rank=0",
            "rank=2",
            "rank=-1",
            "rank=x",
            "phase=read",
            "phase=h2d",
            "phase=comm",
            "phase=report",
            "phase=nope",
            "kind=raise",
            "kind=hang",
            "kind=nan",
            "kind=oom",
            "kind=exit",
            "kind=boom",
            "",
            "=",
            "rank",
        ]
    ),
    st.text(max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(fault_parts, max_size=5))
def test_fuzz_fault_text_gives_a_fault_or_config_error(parts):
    from spmd.core.faults import KINDS, PHASES, Fault, parse_fault

    try:
        fault = parse_fault(",".join(parts))
    except ConfigError:
        return
    assert isinstance(fault, Fault) and (fault.rank is None or fault.rank >= 0)
    assert fault.phase in PHASES and fault.kind in KINDS


@pytest.mark.parametrize(
    "raw, key",
    [
        ({**BASE, "timeout_s": 0}, "timeout_s: must be a positive number of seconds"),
        ({**BASE, "timeout_s": float("nan")}, "timeout_s: must be a positive number of seconds"),
        ({**BASE, "timeout_s": "long"}, "timeout_s: expected a number"),
        ({**BASE, "check_finite": 1}, "check_finite: expected true or false"),
        ({**BASE, "fault": "rank=1"}, "fault: 'rank=1': phase missing"),
        ({**BASE, "fault": "rank=1,phase=compute,kind=oom"}, "kind=oom acts at the memory check"),
        ({**BASE, "fault": 3}, "fault: expected a string"),
    ],
)
def test_reliability_keys_are_checked(raw, key):
    with pytest.raises(ConfigError, match=key.replace("(", r"\(").replace("[", r"\[")):
        job_config_from_dict(raw)


def test_a_fault_on_every_rank():
    from spmd.core.faults import Fault, parse_fault, require_rank

    fault = parse_fault("rank=all,phase=read,kind=hang")
    assert fault == Fault(None, "read", "hang") and fault.describe() == "rank=all,phase=read,kind=hang"
    require_rank(fault, 1)  # any job has every rank
    with pytest.raises(ConfigError, match="rank 'al' is not an integer or all"):
        parse_fault("rank=al,phase=read,kind=hang")


def test_the_fault_variable_wins_over_the_config(monkeypatch):
    from spmd.core.faults import Fault, fault_from

    assert fault_from("rank=1,phase=comm,kind=hang") == Fault(1, "comm", "hang")
    monkeypatch.setenv("SPMD_FAULT", "rank=0,phase=read,kind=nan")
    assert fault_from("rank=1,phase=comm,kind=hang") == Fault(0, "read", "nan")
    monkeypatch.setenv("SPMD_FAULT", "rank=0")
    with pytest.raises(ConfigError, match="SPMD_FAULT: fault: 'rank=0': phase missing"):
        fault_from(None)


def test_the_top_level_parses_without_its_workload_and_the_registry_builds_params():
    import subprocess
    import sys

    from spmd.core.config import config_from_dict
    from spmd.workloads.registry import resolve_params

    cfg = config_from_dict({**BASE, "params": {"ddof": 1, "bogus": 2}})
    assert cfg.params == {"ddof": 1, "bogus": 2}  # a mapping: its workload has not been asked yet
    with pytest.raises(ConfigError, match="unknown key params.bogus"):
        resolve_params(cfg)
    good = resolve_params(config_from_dict({**BASE, "params": {"ddof": 1}}))
    assert good.params.ddof == 1 and resolve_params(good) is good
    with pytest.raises(ConfigError, match="params: expected a mapping, got list"):
        config_from_dict({**BASE, "params": [1]})
    code = (
        "import sys; from spmd.core.config import config_from_dict; "
        "config_from_dict({'workload': 'matmul', 'input': {'path': 'a.h5'}, 'params': {'b': {'path': 'b.h5'}}}); "
        "print(sorted(m for m in sys.modules if m.startswith('spmd.workloads')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


BOMB = """
a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
j: &j [*i, *i, *i, *i, *i, *i, *i, *i, *i, *i]
workload: reduce
input: {path: x.h5}
output: *j
"""


@pytest.mark.parametrize(
    "text, message",
    [
        (BOMB, "more than 100000 values once its aliases are expanded"),
        ("workload: &w [reduce, *w]\ninput: {path: x.h5}\n", "an alias refers to the node that holds it"),
        ("a: " + "[" * 200 + "]" * 200 + "\n", "nested more than 64 levels deep"),
        (
            "workload: reduce\nworkload: matmul\ninput: {path: x.h5}\n",
            "key 'workload' appears twice in one mapping (line 2)",
        ),
        ("workload: reduce\ninput: {path: x.h5}\nparams: {method: xp, method: fused}\n", "key 'method' appears twice"),
    ],
)
def test_hostile_yaml_is_refused_fast_with_a_short_message(tmp_path, text, message):
    import time

    path = tmp_path / "c.yaml"
    path.write_text(text)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        load_job_config(path)
    assert time.perf_counter() - start < 2 and len(str(info.value)) < 300


def test_config_files_are_small_regular_utf8(tmp_path):
    import os

    big = tmp_path / "big.yaml"
    big.write_text("workload: reduce\ninput: {path: x.h5}\n" + "# padding\n" * 200_000)
    with pytest.raises(ConfigError, match=r"big.yaml: \d+ bytes, more than a config may have \(1048576 bytes\)"):
        load_job_config(big)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # reading it would block every rank until someone writes
    with pytest.raises(ConfigError, match="fifo.yaml: not a regular file"):
        load_job_config(fifo)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("workload: reduce\ninput: {path: caf\xe9.h5}\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin.yaml: not UTF-8 text \(byte 34: b'\\xe9\.h5'\)"):
        load_job_config(latin)
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(BASE))
    with pytest.raises(ConfigError, match=r"override 'x=\[\[\[.*: value: nested more than 64 levels"):
        load_job_config(good, ["x=" + "[" * 100 + "]" * 100])


@pytest.mark.parametrize(
    "raw, message",
    [
        ({**BASE, "params": {"ddof": 1, "method": "x" * 100_000}}, "params.method: 'xxx"),
        ({**BASE, "repeats": "y" * 100_000}, "repeats: expected an integer or auto, got 'yyy"),
        ({**BASE, "fault": "rank=" + "x" * 100_000 + ",phase=read,kind=raise"}, "fault: rank 'xxx"),
        ({**BASE, 7: 1, "zz": 2}, "unknown key 7"),  # keys of mixed types: sorted as text, not a TypeError
        ({**BASE, "k" * 1000: 1}, "unknown key 'kkk"),
    ],
)
def test_messages_never_carry_an_unbounded_value(raw, message):
    with pytest.raises(ConfigError, match=message) as info:
        job_config_from_dict(raw)
    assert len(str(info.value)) < 400


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"workload": "train", "input": BASE["input"], "params": {"lr": float("nan")}}, "params.lr"),
        (
            {"workload": "stencil", "input": BASE["input"], "params": {"kernel": "gaussian", "sigma": float("nan")}},
            "params.sigma",
        ),
        ({"workload": "stencil", "input": BASE["input"], "params": {"kernel": [[0, float("nan"), 0]] * 3}}, None),
        ({**BASE, "generate": {"shape": [4], "loc": float("-inf")}}, "generate.loc"),
    ],
)
def test_numbers_are_finite(raw, key):
    with pytest.raises(ConfigError, match=rf"{key}: expected finite numbers" if key else "finite"):
        job_config_from_dict(raw)
    with pytest.raises(ConfigError, match="params.lr: expected finite numbers"):  # as YAML spells NaN
        job_config_from_dict(parse_yaml("{workload: train, input: {path: x.h5}, params: {lr: .nan}}", "config"))


def test_the_capture_is_the_jobs_and_torchs_old_spelling_still_reads():
    base = {"workload": "torch", "input": {"path": "x.h5"}, "params": {"model": "m.py:build"}}
    assert job_config_from_dict({**base, "capture": {"steps": 3}}).capture.steps == 3
    old = job_config_from_dict({**base, "params": {"model": "m.py:build", "capture_steps": 2, "capture_max_mb": 4}})
    assert (old.capture.steps, old.capture.max_mb) == (2, 4)
    # the new name wins where both are given (--capture N over a config's old spelling)
    both = {**base, "capture": {"steps": 5}, "params": {"model": "m.py:build", "capture_steps": 2}}
    assert job_config_from_dict(both).capture.steps == 5
    with pytest.raises(ConfigError, match="capture.steps: 0 to 16"):
        job_config_from_dict({**base, "capture": {"steps": 17}})


@pytest.mark.parametrize("workload", ["reduce", "matmul", "stencil", "train"])
def test_a_capture_of_a_workload_without_steps_of_its_own_is_refused(workload):
    raw = {"workload": workload, "input": {"path": "x.h5"}, "capture": {"steps": 2}}
    with pytest.raises(ConfigError, match="capture.steps: the profiler captures steps of a training workload"):
        job_config_from_dict(raw)


def test_a_plugins_own_params_keep_a_key_named_like_torchs_old_one():
    raw = {"workload": "my.py:f", "input": {"path": "x.h5"}, "params": {"capture_steps": 9}}
    cfg = config_from_dict(raw)
    assert cfg.params == {"capture_steps": 9} and cfg.capture.steps == 0
