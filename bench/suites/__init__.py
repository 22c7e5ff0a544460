"""The benchmark suites: one small module each, listing its cases (``cases(env)``). A case measures spmd and, in
the same run, the ceiling it is held against (and a peer tool where there is one), returning ``Measure``s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Case:
    """One benchmark: ``measure(env)`` takes one run's measures (``batched``: ``measure(env, runs)`` takes every
    run's at once, a list per run, for programs that repeat inside themselves); ``needs`` what it runs on ('gpu',
    'ranks2', 'torch', 'nvmath', 'cuda-mpi'); ``runs`` overrides the run's count."""

    name: str
    measure: Callable[..., list]
    needs: tuple[str, ...] = ()
    runs: int | None = None
    batched: bool = False


def suites() -> dict:
    """name -> module, in the order ``gpu`` runs them."""
    from . import (
        binding,
        comm,
        cuda_mpi,
        faults,
        heldout,
        heldout2,
        heldout3,
        heldout4,
        heldout5,
        heldout6,
        heldout7,
        heldoutcpu,
        heldoutcpu2,
        heldoutcpu3,
        heldoutcpu4,
        heldoutcpu5,
        heldoutcpu6,
        heldoutcpu7,
        heldoutcpu8,
        heldoutcpu9,
        heldoutcpu10,
        heldoutcpu11,
        heldoutcpu12,
        heldoutcpu13,
        io,
        kernels,
        plugins,
        predict,
        scaling,
        stragglers,
        torch_answer,
        torch_models,
        torch_workload,
        train,
    )

    return {
        "kernels": kernels,
        "io": io,
        "comm": comm,
        "train": train,
        "torch": torch_workload,
        "torch-models": torch_models,
        "torch-answer": torch_answer,
        "plugins": plugins,
        "scaling": scaling,
        "predict": predict,
        "heldout": heldout,
        "heldout2": heldout2,
        "heldout3": heldout3,
        "heldout4": heldout4,
        "heldout5": heldout5,
        "heldout6": heldout6,
        "heldout7": heldout7,
        "heldoutcpu": heldoutcpu,
        "heldoutcpu2": heldoutcpu2,
        "heldoutcpu3": heldoutcpu3,
        "heldoutcpu4": heldoutcpu4,
        "heldoutcpu5": heldoutcpu5,
        "heldoutcpu6": heldoutcpu6,
        "heldoutcpu7": heldoutcpu7,
        "heldoutcpu8": heldoutcpu8,
        "heldoutcpu9": heldoutcpu9,
        "heldoutcpu10": heldoutcpu10,
        "heldoutcpu11": heldoutcpu11,
        "heldoutcpu12": heldoutcpu12,
        "heldoutcpu13": heldoutcpu13,
        "faults": faults,
        "stragglers": stragglers,
        "cuda-mpi": cuda_mpi,
        "binding": binding,
    }


GPU = ("kernels", "io", "comm", "train", "torch", "plugins", "scaling", "faults")  # `gpu`: one 10-minute call
CPU = ("io", "comm", "torch", "plugins", "scaling", "faults")  # `cpu`: what a machine without a GPU measures


def expand(names: list[str]) -> list[str]:
    """Suite names with the aliases ``gpu`` and ``cpu`` spelled out, each once, in the given order."""
    known = suites()
    out: list[str] = []
    for name in names:
        for n in GPU if name == "gpu" else CPU if name == "cpu" else (name,):
            if n not in known:
                raise SystemExit(f"bench: unknown suite {n!r} (suites: {', '.join(known)}; aliases gpu, cpu)")
            if n not in out:
                out.append(n)
    return out
