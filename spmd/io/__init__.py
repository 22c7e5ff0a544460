"""HDF5 input: who reads what (plan), each rank's reading by an engine (h5py, direct, mapped; chosen by
choose), results written back (blocks), generated inputs and weak scaling's copies."""
