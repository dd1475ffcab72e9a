"""CPU shim for sgl_kernel (CUDA-built): every function raises. See _pocforge_shim."""

import sys

from _pocforge_shim import install

__version__ = "0.0.0+pocforge.shim"  # old enough that nothing picks a code path needing it

install(__name__, sys.modules[__name__])
