"""Where a newcomer finds a test: a unit test is named after the module (or package) it tests, as
``test_<module>.py`` or, where two modules share a name, ``test_<package>_<module>.py``; a test across modules
says why in CROSS. Unit tests run in one process: spmd's commands started as a user starts them live in
tests/cli. Test file names are unique across tests/, and test data lives under tests/fixtures."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

# unit tests that test a property across modules, or a file that is not a module
CROSS = {
    "test_bench_help": "every program and tool of bench/ answers --help",
    "test_ci_skips": "CI's SLURM start and the skips of tests/slurm",
    "test_code_comments": "comments and docstrings across spmd/, bench/ and tests/",
    "test_cuda_mpi_build": "bench/cuda-mpi/build.sh, a shell script",
    "test_guides": "the prose of README.md and docs/",
    "test_jobscript_templates": "the sbatch templates in jobscripts/",
    "test_kill_during_write": "every writer of spmd's outputs, killed mid-write",
    "test_layers": "the import graph of every module",
    "test_layout": "this file: the tests' own layout",
    "test_moments_tile_host": "the CUDA source moments.cu, compiled for the CPU",
    "test_scale_parts": "pieces of spmd scale across sweep, io.weak, models and report",
    "test_training_report": "a torch run's report across breakdown, table and html",
}


def module_names() -> set[str]:
    """test_ names a module or package may give: its name, or its name with the packages above it, joined by _."""
    names = set()
    for top in ("spmd", "bench"):
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names.update("_".join(parts[i:]) for i in range(len(parts)))
    return names


def test_a_unit_test_is_named_after_what_it_tests():
    known = module_names()
    for path in sorted((TESTS / "unit").glob("test_*.py")):
        name = path.stem.removeprefix("test_")
        assert name in known or path.stem in CROSS, f"{path.name}: no module {name} (or add it to CROSS, saying why)"
    assert all((TESTS / "unit" / f"{name}.py").exists() for name in CROSS), "CROSS names a test that is gone"


def test_test_file_names_are_unique_across_tests():
    seen = {}
    for path in TESTS.rglob("test_*.py"):
        assert path.name not in seen, (path, seen.get(path.name))
        seen[path.name] = path


LAUNCHES = ('"-m", "spmd"', "mpi_job")  # how a test starts spmd's commands (tests/cli/mpi_job.py)


def test_unit_tests_start_no_spmd_command():
    for path in (TESTS / "unit").glob("test_*.py"):
        if path.name != Path(__file__).name:
            text = path.read_text()
            assert not any(word in text for word in LAUNCHES), f"{path.name} launches spmd: it belongs in tests/cli"


def test_test_data_lives_under_fixtures():
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders == {"unit", "cli", "mpi", "gpu", "slurm", "fixtures"}, folders
