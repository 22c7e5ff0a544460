#!/usr/bin/env bash
# Stop what ci/slurm/start.sh started: slurmd(s), slurmctld, munged, the namespaces and the bridge.
pkill -x slurmd; pkill -x slurmctld; pkill -x slurmstepd; pkill -x munged
sleep 0.5
for i in 1 2; do ip netns del spmd-node$i 2>/dev/null; done
ip link del spmd-br0 2>/dev/null
rm -rf /var/spool/slurmctld/* /var/spool/slurmd/*
true
