"""Telemetry of the nodes while benchmarks run.

- :mod:`pocforge.telemetry.recorder`: the one engine (standard library only), run on every
  cluster node and in the kit's own process here: the sources a machine has, recorded raw
  at an interval in threads (and the tools' own loops); :mod:`pocforge.telemetry.sources`:
  which sources it tries, in which order, with which arguments.
- :mod:`pocforge.telemetry.reader`: a raw file as a series, through
  :mod:`pocforge.telemetry.parsers` (one parser per vendor tool, each written against
  output captured on real machines; the captures and their sources are listed in
  ``tests/data/README.md``) and :mod:`pocforge.telemetry.host` (``/proc``, RAPL).
- :mod:`pocforge.telemetry.series`: a series' lines, read and written, and a measured
  window's energy; :mod:`pocforge.telemetry.energy`: the energy arithmetic over a window.
"""
