"""Hooks that put pocforge kernels into frameworks: Hugging Face models (:mod:`.hf`)."""
