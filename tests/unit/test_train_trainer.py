"""Trainer.run_window with a captured step: every step of a window replays the graph without phase marks but the
last, which replays the one with them (event records in a graph cost about 11 us a step on an H100), and that
step's marks stand for the window. Graph objects are stand-ins here; tests/gpu and tests/mpi --gpu run real ones."""

import contextlib
import types

from spmd.workloads.train.trainer import Trainer


class Graph:
    def __init__(self, name, launches):
        self.name, self.launches = name, launches

    def launch(self, stream):
        self.launches.append(self.name)


class Marks:
    def __init__(self):
        self.added = []

    def add_to(self, timer, steps):
        self.added.append((timer, steps))


def trainer(marked: bool):
    launches = []
    return types.SimpleNamespace(
        graph=Graph("plain", launches),
        graph_marked=Graph("marked", launches) if marked else None,
        graph_marks=Marks() if marked else None,
        marks=None,
        stream="stream",
        step=0,
        last_marks=None,
        launches=launches,
        _on_stream=contextlib.nullcontext,
    )


def test_only_the_windows_last_step_replays_the_marked_graph_and_stands_for_the_window():
    t = trainer(marked=True)
    for steps in (5, 1):
        Trainer.run_window(t, steps, "timer")
    assert t.launches == ["plain"] * 4 + ["marked"] + ["marked"]
    assert t.graph_marks.added == [("timer", 5), ("timer", 1)]
    assert t.last_marks is t.graph_marks and t.step == 6


def test_without_marks_every_step_replays_the_plain_graph():
    t = trainer(marked=False)
    Trainer.run_window(t, 4, "timer")
    assert t.launches == ["plain"] * 4 and t.last_marks is None and t.step == 4
