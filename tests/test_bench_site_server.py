"""The benchmark's site server keeps its promises (validators, 304s, page changes)."""

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_bench_site_server_selftest_passes():
    done = subprocess.run([sys.executable, str(BENCH / "site_server.py"), "--selftest", "--pages", "60"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "selftest ok" in done.stdout
