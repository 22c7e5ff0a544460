"""Bad configs: not YAML, not UTF-8, a key twice, an alias bomb, a huge file, an unknown key, a wrong type or
value. Each is refused before any work (exit 2), naming the key or the reason."""

from __future__ import annotations

from .case import FaultCase

# ten levels of ten aliases: 10^10 values once expanded
BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n" for a, b in zip("abcdefghi", "bcdefghij"))
    + "workload: reduce\ninput: {path: x.h5, dataset: x}\noutput: *j\n"
)
BASE = "workload: reduce\ninput: {path: x.h5, dataset: x}\n"


def cases() -> list[FaultCase]:
    def refused(name, config, *says):
        return FaultCase(name, config=config, expect=2, says=says)

    return [
        refused("config that is not YAML", "workload: [reduce\n", "job.yaml: not valid YAML"),
        refused("config that is not UTF-8", (BASE + "output: caf\xe9\n").encode("latin-1"), "not UTF-8 text (byte 60"),
        refused("a key given twice", BASE + "repeats: 2\nrepeats: 3\n", "key 'repeats' appears twice"),
        refused("a YAML alias bomb (10^10 values)", BOMB, "more than 100000 values once its aliases are expanded"),
        refused("a 50 MB config", BASE + "# padding\n" * 5_000_000, "more than a config may have"),
        refused("unknown key", {"repeatz": 2}, "unknown key repeatz"),
        refused("wrong type", {"repeats": "three"}, "repeats: expected an integer or auto, got 'three'"),
        refused("zero repeats", {"repeats": 0}, "repeats: must be >= 1"),
        refused("negative timeout_s", {"timeout_s": -5}, "timeout_s: must be a positive number of seconds, got -5"),
        refused(
            "params.lr: .nan (train)",
            BASE.replace("reduce", "train") + "params: {lr: .nan}\n",
            "params.lr: expected finite numbers, got nan",
        ),
        refused("zero-size generate.shape", {"generate": {"shape": [0]}}, "generate.shape: sizes must be positive"),
    ]
