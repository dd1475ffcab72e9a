"""RMSNorm, optionally fused with the residual add. See :mod:`.op` for the entry points."""

from .op import rms_norm

__all__ = ["rms_norm"]
