"""Which ``srun --mpi`` plugin starts the ranks of a job: what this cluster's srun offers (``srun --mpi=list``)
and which MPI library the ranks load (read without starting MPI).

A plugin is the process-management interface srun speaks to the ranks' MPI while they start. Open MPI 5 speaks
PMIx only (its PMI-1/2 support was removed); Open MPI 4 speaks PMIx, and PMI-2 only where it was built with
SLURM's PMI library; MPICH (and Intel MPI, MVAPICH, which derive from it) speaks PMI-2, and PMIx only where it
was built with it. A wrong or missing plugin shows as every task starting as rank 0 of 1, or as MPI_Init failing.
"""

from __future__ import annotations

import re
import subprocess

from .errors import ConfigError

PLUGIN = re.compile(r"[a-z][a-z0-9_]*")  # a plugin's name as srun lists it, and as a script may carry it


def offered_plugins(listing: str) -> list[str]:
    """The plugins of ``srun --mpi=list``'s output. Older SLURM prints lines such as 'srun: mpi/pmi2'; newer
    prints one per indented line, then 'specific pmix plugin versions available: pmix_v4,pmix_v5'."""
    found: list[str] = []
    for line in listing.splitlines():
        text = line.strip()
        if text.startswith("specific") and ":" in text:
            words = text.split(":", 1)[1].replace(",", " ").split()
        elif text.startswith("srun: mpi/"):
            words = [text.removeprefix("srun: mpi/")]
        elif line[:1].isspace() or text.startswith("mpi/"):
            words = [text.removeprefix("mpi/")]
        else:
            continue
        found += [w for w in words if PLUGIN.fullmatch(w) and w not in found]
    return found


def library_family(version: str) -> tuple[str, int | None]:
    """('openmpi' | 'mpich' | 'other', major version or None) from ``MPI_Get_library_version``'s text."""
    text = version.strip()
    match = re.match(r"Open MPI v(\d+)", text)
    if match:
        return "openmpi", int(match.group(1))
    match = re.search(r"MPICH Version:\s*(\d+)", text)
    if match:
        return "mpich", int(match.group(1))
    if re.search(r"Intel\(R\) MPI|MVAPICH|MPICH", text):
        return "mpich", None
    return "other", None


def choose_plugin(offered: list[str], version: str) -> tuple[str | None, str]:
    """(plugin, why) for ranks of MPI library ``version`` under an srun that offers ``offered``; plugin None: let
    srun use the cluster's default (it lists none).

    Raises:
        ConfigError: the library needs a plugin this srun does not have (Open MPI 5 without PMIx).
    """
    family, major = library_family(version)
    name = " ".join(version.strip().splitlines()[0].split())[:60] if version.strip() else "an unknown MPI"
    pmix = [p for p in offered if p == "pmix"] or [p for p in offered if p.startswith("pmix")]
    if not offered:
        return None, f"srun lists no MPI plugin here: its default (MpiDefault) for {name}"
    if family == "openmpi" and (major or 0) >= 5:
        if not pmix:
            raise ConfigError(
                f"{name} speaks PMIx only, and this srun offers {', '.join(offered)}: ask the cluster for SLURM "
                f"with PMIx, or load an MPI built for it"
            )
        return pmix[0], f"{name} speaks PMIx only (Open MPI 5 has no PMI-2)"
    if family == "openmpi":
        if pmix:
            return pmix[0], f"{name} speaks PMIx (PMI-2 only if built with SLURM's PMI library)"
        if "pmi2" in offered:
            return "pmi2", f"{name}, and this srun has no PMIx: PMI-2 (Open MPI must be built with SLURM's PMI)"
    if family == "mpich":
        if "pmi2" in offered:
            return "pmi2", f"{name} speaks PMI-2"
        if pmix:
            return pmix[0], f"{name}, and this srun has no PMI-2: PMIx (MPICH must be built with it)"
    for plugin in (*pmix, "pmi2"):
        if plugin in offered:
            return plugin, f"{name}: the first of PMIx, PMI-2 this srun offers"
    return None, f"this srun offers neither PMIx nor PMI-2 ({', '.join(offered)}): its default for {name}"


def local_choice() -> tuple[str | None, str]:
    """``choose_plugin`` for this node: ``srun --mpi=list`` asked, the library read without starting MPI."""
    try:
        listing = subprocess.run(["srun", "--mpi=list"], capture_output=True, text=True, timeout=60)
        offered = offered_plugins(listing.stdout + listing.stderr)
    except (OSError, subprocess.TimeoutExpired):
        offered = []
    return choose_plugin(offered, library_version())


def library_version() -> str:
    """``MPI_Get_library_version``, which MPI allows before MPI_Init: mpi4py told not to initialize."""
    import mpi4py

    mpi4py.rc.initialize = False
    from mpi4py import MPI

    return MPI.Get_library_version().replace("\x00", "")
