"""Benchmarking: suites, the measurement matrix, metric math, reference drafts."""
