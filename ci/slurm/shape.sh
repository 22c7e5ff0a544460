#!/usr/bin/env bash
# The link between the two namespaced nodes of ci/slurm/start.sh at a known bandwidth, or back to unshaped:
#   bash ci/slurm/shape.sh 400mbit    # tc's token bucket (tbf) on both bridge-side veths: each direction
#   bash ci/slurm/shape.sh off        # crosses one of them on its way out, so both directions get the rate
# (This kernel has no netem: a rate, no added latency.) Exits non-zero saying why where tc cannot do it.
set -euo pipefail
rate=${1:?usage: shape.sh RATE|off (RATE as tc writes it: 400mbit, 1gbit)}
command -v tc >/dev/null || { echo "ci/slurm/shape.sh: no tc (Debian's iproute2)" >&2; exit 1; }
if [[ $rate == off ]]; then
  for i in 1 2; do tc qdisc del dev spmd-veth$i root 2>/dev/null || true; done
  exit 0
fi
[[ $rate =~ ^[0-9]+(bit|kbit|mbit|gbit)$ ]] || { echo "ci/slurm/shape.sh: rate like 400mbit, got '$rate'" >&2; exit 2; }
for i in 1 2; do
  # a burst of 32 KiB (at least rate/HZ, which tbf needs; a larger one lets a lone collective after a pause
  # through faster than back-to-back ones: 256 KiB made a repeat's allgather 13% faster than bench comm's),
  # a queue of 100 ms before it drops
  tc qdisc replace dev spmd-veth$i root tbf rate "$rate" burst 32kb latency 100ms
done
