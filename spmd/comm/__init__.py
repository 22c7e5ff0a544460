"""Communicators: one interface (base), its backends (nccl, mpi, mpi-cuda), the factory that picks one,
and the watched MPI communicator every blocking call goes through."""
