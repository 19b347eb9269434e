"""Building the official benchmarks (HPL, HPCG) from their sources, into the cache, with provenance."""
