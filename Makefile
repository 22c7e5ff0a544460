# `make demo` and `make test` each create .venv and install what they need (fresh machine OK).
# Without a GPU: NumPy on the CPU with the PyPI MPICH wheel. With one (nvidia-smi works):
# CuPy + NCCL, the system MPI, one rank per GPU.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
TIMEOUT ?= timeout 1200

HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
ifeq ($(HAS_GPU),yes)
  EXTRAS     ?= cuda13,plot,torch
  VENV_FLAGS ?= --system-site-packages
  MPIEXEC    ?= mpiexec
  NP         ?= $(shell nvidia-smi -L | wc -l)
  GPU_FLAG   := --gpu
  GPU_TESTS  := tests/gpu
else
  EXTRAS     ?= mpich,plot,torch
  VENV_FLAGS ?=
  MPIEXEC    ?= $(VENV)/bin/mpiexec
  NP         ?= 2
  GPU_FLAG   :=
  GPU_TESTS  :=
endif

.PHONY: demo test lint test-unit test-cli test-mpi test-slurm claims clean

# PyTorch for workload torch: TORCH pins the build installed first (the CPU build CI keeps on disk; plain
# "torch" would take PyPI's CUDA build of several GB); TORCH= leaves the choice to pip.
TORCH ?= $(if $(HAS_GPU),,torch==2.13.0)
# Holistic Trace Analysis (tests/unit/test_kernels.py compares spmd's breakdown with it), without its declared
# dependencies: the hta extra (in test's too) holds what it imports
HTA ?= HolisticTraceAnalysis==0.5.0

$(VENV)/.installed-%: pyproject.toml
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(if $(and $(TORCH),$(findstring torch,$*)),$(PY) -m pip install -q "$(TORCH)")
	$(PY) -m pip install -q -e ".[$*]"
	$(if $(or $(findstring test,$*),$(findstring hta,$*)),$(PY) -m pip install -q --no-deps "$(HTA)")
	touch $@

# A strong and weak scaling sweep of the distributed reduction over 1..NP ranks (inputs are
# generated on the way), ending in results/reduce/scaling/scaling.html.
demo: $(VENV)/.installed-$(EXTRAS)
	$(MPIEXEC) -n $(NP) $(PY) -m spmd scale inputs/reduce.yaml --mode both
	@echo "open results/reduce/scaling/scaling.html in a browser"

test: lint test-unit test-cli test-mpi test-slurm

# ruff (pinned in the test extra): the lint rules and the formatter of pyproject.toml, the whole tree clean
lint: $(VENV)/.installed-test,$(EXTRAS)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Under the SLURM of ci/slurm/start.sh (.ci/run starts it as root); without one these skip, saying why.
test-slurm: $(VENV)/.installed-test,$(EXTRAS)
	SPMD_MPIEXEC="$(MPIEXEC)" $(TIMEOUT) $(PY) -m pytest -q -rs -p no:cacheprovider tests/slurm

# One process each, no launch. With a GPU, tests/gpu too (a test needing more GPUs than the machine has skips,
# saying how many it found).
test-unit: $(VENV)/.installed-test,$(EXTRAS)
	SPMD_MPIEXEC="$(MPIEXEC)" $(PY) -m pytest -q -rs tests/unit $(GPU_TESTS) $(GPU_FLAG)

# The launched tests: spmd's commands started as a user starts them, under mpiexec where they need ranks.
test-cli: $(VENV)/.installed-test,$(EXTRAS)
	SPMD_MPIEXEC="$(MPIEXEC)" $(PY) -m pytest -q -rs tests/cli

# pytest-mpi: every rank runs the session; 3 ranks give uneven splits, 4 a 2x2 process grid.
MPI_AT_4 := tests/mpi/test_matmul.py tests/mpi/test_stencil.py tests/mpi/test_train.py tests/mpi/test_plugins.py
test-mpi: $(VENV)/.installed-test,$(EXTRAS)
	$(TIMEOUT) $(MPIEXEC) -n 2 $(PY) -m pytest -q -rs -p no:cacheprovider --with-mpi tests/mpi $(GPU_FLAG)
	$(TIMEOUT) $(MPIEXEC) -n 3 $(PY) -m pytest -q -rs -p no:cacheprovider --with-mpi tests/mpi $(GPU_FLAG)
	$(TIMEOUT) $(MPIEXEC) -n 4 $(PY) -m pytest -q -rs -p no:cacheprovider --with-mpi $(MPI_AT_4) $(GPU_FLAG)

# The documents' figures: rendering the committed raw results reproduces them byte for byte (python -m bench report
# --check; tests/unit/test_bench.py runs the same check in make test).
claims: $(VENV)/.installed-test,$(EXTRAS)
	$(PY) -m bench report --check

clean:
	rm -rf $(VENV) data results .pytest_cache .hypothesis
