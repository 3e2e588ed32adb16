"""What both experiments and the benchmark share: atomic file writes, the OpenMP waiting policy, centred ranks
for evolution strategies, the training curves, provenance stamps, the Panda layer."""
