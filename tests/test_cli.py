import subprocess
import sys


def test_placeholder_cli_version():
    r = subprocess.run(
        [sys.executable, "-m", "pentegg.cli", "--version"], capture_output=True, text=True
    )
    assert r.returncode == 0 and r.stdout.startswith("pentegg ")
