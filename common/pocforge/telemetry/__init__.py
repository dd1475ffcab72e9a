"""Telemetry of the nodes while benchmarks run.

- :mod:`pocforge.telemetry.parsers`: one sample of each vendor tool's output as normalized
  per-GPU samples; :mod:`pocforge.telemetry.host`: the host's own readings (``/proc``,
  RAPL). Every parser was written against output captured on real machines; the captures
  and their sources are listed in ``tests/data/README.md``.
- :mod:`pocforge.telemetry.sampler`: the sources a node has, sampled at an interval in
  threads (and the tools' own loops) into a JSONL series.
- :mod:`pocforge.telemetry.series`: a series read back, and a measured window's energy;
  :mod:`pocforge.telemetry.energy`: the energy arithmetic over a window.
"""
