"""pocforge.kernels: the shared Triton kernel library. Stand-alone: never imports pocforge's other packages."""
