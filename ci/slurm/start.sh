#!/usr/bin/env bash
# A real SLURM on this machine for the tests (CI runs as root with apt):
#   - Debian's slurm-wlm and munge, installed if missing;
#   - one munged; one slurmctld; a slurmd for this host (partition `local`);
#   - with NODES=2 (the default when `ip netns` works): two more "nodes", node1 and node2, each a slurmd in
#     its own network namespace (veth to a bridge, 10.77.0.0/24) and its own hostname (unshare --uts),
#     in partition `pair`, so `srun -N 2` places ranks on two hosts and MPI crosses the veth link.
# Idempotent: a second run restarts the daemons. Stop with ci/slurm/stop.sh.
# Writes ci/slurm/state.env (what started: SPMD_SLURM=1, SPMD_SLURM_NODES=1|2, and why a piece did not).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=$HERE/state.env
NODES=${NODES:-2}
CPUS=${SLURM_CPUS:-4}  # declared per node (SlurmdParameters=config_overrides): 3 tasks fit on a 2-core machine
: > "$STATE"
note() { echo "$*" >> "$STATE"; echo "ci/slurm: $*" >&2; }
# Under CI (CI=true) the tests this cluster serves must run: a piece that does not start fails the run.
skip() {  # skip KEY REASON: record why, then exit (1 under CI, 0 elsewhere: the tests skip saying why)
  note "$1='$2'"
  if [[ ${CI:-} == true ]]; then echo "ci/slurm: CI=true and SLURM did not start: failing" >&2; exit 1; fi
  [[ $1 == SPMD_SLURM_SKIP ]] && exit 0
}

if [[ $(id -u) != 0 ]]; then skip SPMD_SLURM_SKIP "not root: cannot install or start slurmctld/slurmd"; fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge) \
    > /tmp/spmd-slurm-apt.log 2>&1 \
    || { skip SPMD_SLURM_SKIP "apt-get install slurm-wlm munge failed (see /tmp/spmd-slurm-apt.log)"; }
fi
bash "$HERE/stop.sh" >/dev/null 2>&1
# MPICH leaves the shared-memory files of killed ranks in /dev/shm (1,558 had piled up on a development machine,
# where ranks of the 2-node test then failed in MPI_Init with "Out of memory"; none did after they were removed).
# Remove those no process has mapped.
in_use=$(cat /proc/[0-9]*/maps 2>/dev/null | grep -o '/dev/shm/mpich_shm_[^ ]*' | sort -u)
for f in /dev/shm/mpich_shm_*; do
  [[ -e $f ]] && ! grep -qxF "$f" <<< "$in_use" && rm -f "$f"
done

# munge: one key, one daemon; its socket is a file, so the namespaced slurmds use it too
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
[[ -s /etc/munge/munge.key ]] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
chmod 400 /etc/munge/munge.key
munged --force 2>/dev/null || { skip SPMD_SLURM_SKIP "munged did not start"; }

# the two-node layout: a bridge here, a namespace + veth + hostname per node
TWO=0
if [[ $NODES == 2 ]]; then
  if ip link add spmd-br0 type bridge 2>/tmp/spmd-netns.err && ip addr add 10.77.0.1/24 dev spmd-br0 \
      && ip link set spmd-br0 up; then
    TWO=1
    for i in 1 2; do
      ip netns add spmd-node$i && ip link add spmd-veth$i type veth peer name eth0 netns spmd-node$i \
        && ip link set spmd-veth$i master spmd-br0 && ip link set spmd-veth$i up \
        && ip -n spmd-node$i addr add 10.77.0.1$i/24 dev eth0 && ip -n spmd-node$i link set eth0 up \
        && ip -n spmd-node$i link set lo up && ip -n spmd-node$i route add default via 10.77.0.1 \
        2>>/tmp/spmd-netns.err || TWO=0
    done
  fi
  if [[ $TWO == 0 ]]; then
    skip SPMD_SLURM_TWO_SKIP "network namespaces unavailable: $(tr '\n' ' ' < /tmp/spmd-netns.err)"
  else
    sed -i '/spmd-node[12]$/d' /etc/hosts
    printf '10.77.0.11 spmd-node1\n10.77.0.12 spmd-node2\n' >> /etc/hosts
  fi
fi

HOST=$(hostname -s)
CTL_ADDR=$([[ $TWO == 1 ]] && echo 10.77.0.1 || echo 127.0.0.1)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat > /etc/slurm/slurm.conf <<CONF
# written by spmd's ci/slurm/start.sh: a test cluster on one machine
ClusterName=spmd-ci
SlurmctldHost=$HOST($CTL_ADDR)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/spmd-slurmctld.pid
SlurmdPidFile=/run/spmd-slurmd-%n.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=4000 State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=60 State=UP OverSubscribe=YES
CONF
if [[ $TWO == 1 ]]; then
  cat >> /etc/slurm/slurm.conf <<CONF
NodeName=spmd-node1 NodeAddr=10.77.0.11 CPUs=$CPUS RealMemory=4000 State=UNKNOWN
NodeName=spmd-node2 NodeAddr=10.77.0.12 CPUs=$CPUS RealMemory=4000 State=UNKNOWN
PartitionName=pair Nodes=spmd-node[1-2] MaxTime=60 State=UP OverSubscribe=YES
CONF
fi
mkdir -p /var/spool/slurmd/$HOST
slurmctld -i 2>>/var/log/slurm/start.err || { skip SPMD_SLURM_SKIP "slurmctld did not start"; }
slurmd -N "$HOST" 2>>/var/log/slurm/start.err || { skip SPMD_SLURM_SKIP "slurmd did not start"; }
if [[ $TWO == 1 ]]; then
  for i in 1 2; do
    mkdir -p /var/spool/slurmd/spmd-node$i
    # its own hostname (UTS namespace) and network; jobs it starts inherit both. nsenter, not
    # `ip netns exec`, which mounts a fresh /sys and hides the cgroup file system slurmd needs
    nsenter --net=/run/netns/spmd-node$i unshare --uts sh -c "hostname spmd-node$i && exec slurmd -N spmd-node$i" \
      2>>/var/log/slurm/start.err || TWO=0
  done
fi
# wait until the nodes are idle
want=$([[ $TWO == 1 ]] && echo 3 || echo 1)
for _ in $(seq 60); do
  idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /idle/' | sort -u | wc -l)
  (( idle >= want )) && break
  sleep 0.5
done
sinfo -N -o '%N %P %t %c' >&2
if (( idle < 1 )); then skip SPMD_SLURM_SKIP "no node became idle (see /var/log/slurm)"; fi
note "SPMD_SLURM=1"
if [[ $TWO == 1 && $idle -ge 3 ]]; then note "SPMD_SLURM_NODES=2"
elif [[ $NODES == 2 && $TWO == 1 ]]; then
  skip SPMD_SLURM_TWO_SKIP "the namespaced slurmds did not become idle (see /var/log/slurm)"
fi
