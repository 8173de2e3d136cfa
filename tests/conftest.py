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
