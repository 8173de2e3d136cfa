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


#: The test files that take longest, longest first: `./run test` hands whole files to its
#: workers in collection order (`--dist loadfile --no-loadscope-reorder`), so these go
#: first and the short files fill in after them. xdist's own order (most tests first) left
#: the cocotb accelerator file, 10 minutes in 6 tests, to run alone at the end. Measured
#: at 5079742 (a clean clone's whole suite, two workers, seconds of test time per file
#: from its junit XML): 589, 435, 405, 403, 390, 378, 168, 165, 160; the rest 106 and
#: less.
#: A scheduling hint only: a file not listed keeps its place, a stale entry costs
#: minutes, not a result.
LONGEST_FILES = (
    "test_rtl_evaluator.py",
    "test_device_sim.py",
    "test_build.py",
    "test_cocotb_accelerator.py",
    "test_compact_soc.py",
    "test_cocotb_evaluator.py",
    "test_hw_cli.py",
    "test_rtl_accelerator.py",
    "test_rtl_synth.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    # a stable sort: each file's tests stay together and in their order
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
