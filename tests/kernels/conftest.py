"""Kernel tests run the Triton kernels on the CPU through Triton's interpreter.

``TRITON_INTERPRET`` is read when a ``@triton.jit`` function is decorated, so it
is set here, before any test module imports a kernel.
"""

import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import random  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

SEED_ENV = "POCFORGE_TEST_SEED"


@pytest.fixture(autouse=True)
def fresh_seed():
    """Draw fresh random inputs every run; print the seed so a failure can be replayed.

    Re-run a failing test with ``POCFORGE_TEST_SEED=<seed>`` to get the same inputs.
    """
    seed = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**31))
    torch.manual_seed(seed)
    print(f"{SEED_ENV}={seed}")
    return seed


@pytest.fixture(autouse=True)
def poisoned_outputs():
    """Every ``torch.empty*`` allocation is NaN-filled (integers: their max) during a test.

    PyTorch does this in deterministic mode with ``fill_uninitialized_memory``; the
    ops allocate their outputs with ``torch.empty``, so an element a kernel forgot to
    write stays NaN and fails the relative-error check.
    """
    previous = torch.are_deterministic_algorithms_enabled()
    previous_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield
    torch.use_deterministic_algorithms(previous, warn_only=previous_warn)


@pytest.fixture
def reference_backend(monkeypatch):
    """Route every op to its plain-torch reference for the duration of a test."""
    monkeypatch.setenv("POCFORGE_KERNELS", "reference")


def pytest_collection_modifyitems(config, items):
    """Every test here is part of the kernel suite (`make test-kernels`): interpreter runs
    and compile checks take minutes, so `make test-unit` leaves them out."""
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.kernels)
