"""tests/gpu: every test needs a GPU and the ``--gpu`` option (``make test`` gives it where nvidia-smi
works); one marked ``gpus(n)`` needs n GPUs and is skipped, saying how many it found, where fewer
are visible."""

import pytest


@pytest.fixture(autouse=True)
def enough_gpus(request, gpu):
    if not gpu:
        pytest.fail("tests/gpu need a GPU: run them with --gpu on a GPU machine")
    from spmd.core import xp

    marker = request.node.get_closest_marker("gpus")
    need = marker.args[0] if marker else 1
    found = xp.gpu_count()
    if found < need:
        pytest.skip(f"needs {need} GPUs, found {found}")
