"""The watchdog on its own, under a real ``mpiexec``: an NCCL asynchronous error polled from its
thread ends the job naming the rank and phase after aborting the communicator, and a clean run
shuts it down without leaving a message in flight.

NCCL itself needs GPUs; here a stand-in registered where spmd keeps its NCCL communicators
raises the error NCCL's ncclCommGetAsyncError would report (tests/gpu runs the real thing).
"""

from __future__ import annotations

import re
import socket
import textwrap

from mpi_job import spmd_script

DRIVER = textwrap.dedent("""
    import sys, time
    from spmd.comm import nccl
    from spmd.core.runtime import Context
    from spmd.core.waits import note_phase
    from spmd.core.watchdog import set_timeout

    class Broken:  # what cupy's NcclCommunicator does once NCCL has seen a peer fail
        def check_async_error(self):
            raise RuntimeError("NCCL_ERROR_REMOTE_ERROR: remote process exited or there was a network error")
        def abort(self):
            print("stand-in communicator aborted", file=sys.stderr, flush=True)

    class Owner:
        comm = None

    ctx = Context(watchdog=True)
    set_timeout(float(sys.argv[2]))
    note_phase("comm")
    if sys.argv[1] == "nccl-error" and ctx.rank == 1:
        owner = Owner()
        owner.comm = Broken()
        nccl._live.append(__import__("weakref").ref(owner))
    for _ in range(int(sys.argv[3])):
        ctx.comm.allgather(ctx.rank)
        time.sleep(0.05)
    ctx.close()
    print(f"rank {ctx.rank} done", flush=True)
""")


def test_an_nccl_async_error_ends_the_job_after_aborting_the_communicator(tmp_path):
    rc, out, err, elapsed = spmd_script(tmp_path, DRIVER, "nccl-error", "30", "400", ranks=2)
    assert rc == 4, (out, err)
    assert f"rank 1 on {socket.gethostname()}: NCCL asynchronous error in phase comm: NCCL_ERROR_REMOTE_ERROR" in err, (
        err
    )
    assert "stand-in communicator aborted" in err
    assert elapsed < 20  # polled every beat (1 s), not after timeout_s (30 s)


def test_a_clean_run_stops_the_watchdog_on_every_rank(tmp_path):
    """More beats than the run has collectives, a short timeout that is never reached: every rank
    finishes, exit 0, and MPI_Finalize finds no beat left unreceived (it would hang or complain)."""
    rc, out, err, _ = spmd_script(tmp_path, DRIVER, "clean", "2", "30", ranks=3)
    assert rc == 0, err
    assert sorted(re.findall(r"rank \d done", out)) == ["rank 0 done", "rank 1 done", "rank 2 done"], out
    assert "watchdog" not in err, err


HOOKS = textwrap.dedent("""
    import sys
    from mpi4py import MPI
    from spmd.core import watchdog

    def finished():
        print(f"rank {MPI.COMM_WORLD.rank}: first hook ran", file=sys.stderr, flush=True)
        return True

    watchdog.on_abort("first hook", finished)
    watchdog.on_abort("slow hook", lambda: False)
    watchdog.on_abort("first hook", finished)  # registered twice: runs once
    watchdog.on_abort("broken hook", lambda: 1 / 0)
    if MPI.COMM_WORLD.rank == 1:
        watchdog.end_job(MPI.COMM_WORLD, 7)
    MPI.COMM_WORLD.Barrier()  # the other ranks wait here until the abort ends them
""")


def test_end_job_runs_every_abort_hook_once_then_ends_every_rank(tmp_path):
    """The one way a job ends on an error (the watchdog's, or a rank failing alone in the CLI): the hooks
    libraries registered (NCCL's ncclCommAbort), each once, a hook that fails or overruns named, then
    MPI_Abort with the code."""
    rc, out, err, elapsed = spmd_script(tmp_path, HOOKS, ranks=3)
    assert rc == 7, (out, err)
    assert err.count("first hook ran") == 1 and "rank 1: first hook ran" in err, err
    assert "rank 1: slow hook did not return in time; ending the job anyway" in err, err
    assert "rank 1: broken hook failed (division by zero); ending the job anyway" in err, err
    assert elapsed < 20


STUCK = textwrap.dedent("""
    import ctypes, sys, time
    from spmd.core.runtime import Context
    from spmd.core.timing import enter_phase
    from spmd.core.watchdog import set_timeout

    ctx = Context(watchdog=True)
    set_timeout(float(sys.argv[2]))
    enter_phase("read")  # a phase of a run, on every rank, that never ends
    if sys.argv[1] == "sleep":
        time.sleep(120)  # outside any collective: no peer waits for anyone
    else:
        ctypes.PyDLL(None).sleep(120)  # in C, holding the GIL (as HDF5 reading a FIFO does): no thread runs
""")


def test_a_phase_that_never_ends_on_every_rank_ends_the_job(tmp_path):
    rc, out, err, elapsed = spmd_script(tmp_path, STUCK, "sleep", "2", ranks=3)
    assert rc == 4, (out, err)
    assert re.search(
        r"watchdog: rank \d on .* has been in phase read for 2\.\d s \(timeout_s: 2\) and no rank "
        r"waits in a collective: a step that never returns",
        err,
    ), err
    assert elapsed < 15


def test_a_hang_that_holds_the_gil_is_ended_by_the_backstop(tmp_path):
    """No Python thread runs, the watchdog's included: faulthandler, re-armed on every beat, prints each
    rank's stack (where it hangs) and ends the process timeout_s + 20 s after the last beat."""
    rc, out, err, elapsed = spmd_script(tmp_path, STUCK, "gil", "1", ranks=2, timeout=90)
    assert rc != 0, (out, err)
    # (two ranks' dumps reach the launcher at once, and their lines may interleave)
    assert "Timeout (0:00:21)!" in err and "driver.py" in err and "line 13 in <module>" in err, err
    assert 20 < elapsed < 45
