#!/usr/bin/env bash
# Stop what ci/slurm/start.sh started: slurmd(s), slurmctld, munged, the namespaces and the bridge.
# slurmstepd names itself "slurmstepd: [job.step]": matched by its start, with the job steps it still runs
pkill -x slurmd; pkill -x slurmctld; pkill -f '^slurmstepd'; pkill -x munged
sleep 0.5
for i in 1 2; do ip netns del spmd-node$i 2>/dev/null; ip link del spmd-veth$i 2>/dev/null; done  # a veth outlives
ip link del spmd-br0 2>/dev/null                                                                 # its namespace
rm -rf /var/spool/slurmctld/* /var/spool/slurmd/*
true
