import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def pentegg_cmd() -> list[str]:
    """How to run the CLI from tests: the installed console script's module."""
    return [sys.executable, "-m", "pentegg"]


def pytest_configure(config):
    os.environ.setdefault("PYTHONHASHSEED", "0")
    # Under pytest-xdist (`./run test` runs two or more workers) each worker builds its
    # cocotb simulations in a tree of its own: two workers running the same module and
    # parameters would otherwise compile into, and read results from, the same
    # directory (sim/harness.py build_dir). The native-build and firmware caches are
    # safe to share (a lock, an atomic rename).
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and "PENTEGG_SIM_BUILD" not in os.environ:
        os.environ["PENTEGG_SIM_BUILD"] = str(ROOT / "build" / "sim" / worker)
