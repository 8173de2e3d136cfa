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
#: at 3673da5 (one worker, seconds per file, beside a place and route): 615, 576, 474,
#: 452, 396, 303, 298, 231; the rest 188 and less. The Verilator random jobs of
#: test_cocotb_evaluator.py and the quantized xor comparison and resume tests of
#: test_device_sim.py (2026-12-07) moved those two up: in a cold run beside other work
#: (3,018 s for the suite, where CI took 1,555 to 2,006) the three Verilator tests took
#: 358 s and the quantized xor comparison 90 s.
#: A scheduling hint only: a file not listed keeps its place, a stale entry costs
#: minutes, not a result.
LONGEST_FILES = (
    "test_cocotb_accelerator.py",
    "test_rtl_evaluator.py",
    "test_device_sim.py",
    "test_cocotb_evaluator.py",
    "test_compact_soc.py",
    "test_build.py",
    "test_rtl_accelerator.py",
    "test_hw_cli.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    # a stable sort: each file's tests stay together and in their order
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
