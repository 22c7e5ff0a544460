"""Communicators: one interface (base), its backends (nccl, mpi, mpi_cuda) and the factory that picks one.
Their blocking MPI calls go through the watched communicator of core.watched."""
