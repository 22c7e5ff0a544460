"""Workload ``torch``: the user's own PyTorch model trained data-parallel (DDP) under spmd's runtime.

workload.py drives it; step.py takes the steps; checks.py, gradients.py, reference.py, schedule.py and verify.py
verify them; compute.py is what a step computes; dist.py starts torch.distributed from MPI; inputs.py, params.py
and user_model.py read what the user gives; phases.py splits a step's time."""
