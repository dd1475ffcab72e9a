"""Correctness gates of a serving deployment: sanity before the sweeps, accuracy
(lm-evaluation-harness against the POC's own server) and parity (the POC's kernels and
patches against the framework's own). See ``pocforge.spec.gates`` for the spec side."""
