"""What the two training workloads (``train``, ``torch``) share: the data and its order, the scaling rules,
the checks on replicas and losses, and how a step is reported."""
