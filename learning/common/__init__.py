"""What both experiments and the benchmark share: atomic file writes, the OpenMP waiting policy, centred ranks for evolution strategies, provenance stamps."""
