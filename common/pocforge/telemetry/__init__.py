"""GPU telemetry: one sample of each vendor tool's output as normalized per-GPU samples
(:mod:`pocforge.telemetry.parsers`) and the energy arithmetic over a point's window
(:mod:`pocforge.telemetry.energy`).

Pure functions only: running the tools on the nodes (the sampler) lives elsewhere and hands
their text to these parsers. Every parser was written against output captured on real
machines; the captures and their sources are listed in ``tests/data/README.md``.
"""
