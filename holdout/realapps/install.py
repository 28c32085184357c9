"""Install the real applications of DynaBot's real-software hold-out set, each into its own
environment under ``$XDG_CACHE_HOME/webrace-realapps/<app>`` (``WEBRACE_REALAPPS_DIR`` wins):
a venv from PyPI, or Debian packages (``apt-get``, as root) where Debian ships the software,
and the app's data, built from what this machine has offline (see each module in ``apps/``).

    python holdout/realapps/install.py [--apps a,b] [--force]

Needs the network for PyPI and Debian only; nothing is fetched when the apps run. Prints, per
app, the seconds taken and the disk used; an app that fails is reported and the others go on.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the package lives in holdout/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from realapps.apps import APPS  # noqa: E402
from realapps.common import cache_dir  # noqa: E402


def disk_mb(path: Path) -> float:
    done = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True)
    return int(done.stdout.split()[0]) / 1024 if done.returncode == 0 else 0.0


def install(name: str, root: Path, force: bool = False) -> tuple[bool, float, str]:
    """(ok, seconds, why it failed). A half-done install is removed, so the next try starts clean."""
    home = root / name
    marker = home / "installed"
    if marker.exists() and not force:
        return True, 0.0, "already installed"
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    started = time.monotonic()
    try:
        APPS[name].install(home)
    except (RuntimeError, OSError, subprocess.SubprocessError) as error:
        return False, time.monotonic() - started, str(error)
    seconds = time.monotonic() - started
    marker.write_text(f"{seconds:.0f}\n", encoding="utf-8")
    return True, seconds, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python holdout/realapps/install.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", default=",".join(APPS), help="comma-separated (default: all): %(default)s")
    parser.add_argument("--force", action="store_true", help="reinstall apps already installed")
    args = parser.parse_args(argv)
    names = [n for n in args.apps.split(",") if n]
    unknown = [n for n in names if n not in APPS]
    if unknown:
        parser.error(f"unknown app {', '.join(unknown)}; known: {', '.join(APPS)}")
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    failed = 0
    print("| app | installed | seconds | disk (MB) | note |\n|---|---|---|---|---|", flush=True)
    for name in names:
        ok, seconds, why = install(name, root, args.force)
        failed += not ok
        note = why if ok else " / ".join(why.splitlines()[-3:])
        print(f"| {name} | {'yes' if ok else 'FAILED'} | {seconds:.0f} | {disk_mb(root / name):.0f} | {note} |",
              flush=True)
    print(f"under {root}; apt-installed Debian packages are under /usr (not counted)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
