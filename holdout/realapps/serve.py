"""Start the installed real applications on 127.0.0.1, each on a free port with its own access
log, and stop them.

    python holdout/realapps/serve.py [--apps a,b] [--seeds FILE]   # until Ctrl-C

    import sys; sys.path.insert(0, "holdout")
    from realapps.serve import RealApps
    with RealApps() as apps:                      # every installed app (install.py first)
        apps.running["trac"].base                 # http://127.0.0.1:PORT
        apps.sources()                            # the ground truth's entries, start URLs filled in
        mark = apps.marks()                       # log offsets now; then run the crawl...
        apps.posts("trac", since=mark["trac"])    # path -> POSTs the app's own log records

Every run copies what an app may write (a tracker's database, a wiki's pages) into a fresh
temporary directory: a run starts from the installed data, and what a crawler did in one run
is not seen by the next.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

if __package__ in (None, ""):  # run as a script: the package lives in holdout/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from realapps import logs  # noqa: E402
from realapps.apps import APPS  # noqa: E402
from realapps.common import HOST, cache_dir, free_port  # noqa: E402

TRUTH = Path(__file__).resolve().parent / "truth.toml"


@dataclass
class Running:
    name: str
    base: str  # http://127.0.0.1:PORT, no trailing slash
    log: Path  # the server's own access log
    process: subprocess.Popen
    output: Path  # what the server printed (the access log too, for most)

    def url(self, path: str) -> str:
        return self.base + "/" + path.lstrip("/")


def installed(name: str, root: Path | None = None) -> bool:
    return ((root or cache_dir()) / name / "installed").exists()


def _wait_ready(running: Running, path: str, timeout: float) -> None:
    """Request ``path`` until the app answers below 400 (the server is listening and its app loaded)."""
    deadline = time.monotonic() + timeout
    why = "no answer"
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            tail = running.output.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(f"{running.name} exited with {running.process.returncode}: " + " / ".join(tail))
        connection = http.client.HTTPConnection(HOST, int(running.base.rsplit(":", 1)[1]), timeout=10)
        try:
            connection.request("GET", path)
            status = connection.getresponse().status
            if status < 400:
                return
            why = f"status {status}"
        except OSError as error:
            why = str(error)
        finally:
            connection.close()
        time.sleep(0.2)  # polling a server that is starting, not synchronising with a result
    raise RuntimeError(f"{running.name} did not answer {path} within {timeout:.0f} s ({why})")


class RealApps:
    """The installed apps (or those named) running, until :meth:`stop` or the ``with`` block ends."""

    def __init__(self, names: list[str] | None = None, root: Path | None = None, timeout: float = 120.0) -> None:
        self.root = root or cache_dir()
        self.names = names or [name for name in APPS if installed(name, self.root)]
        self.timeout = timeout
        self.running: dict[str, Running] = {}
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._files: list = []

    def start(self) -> RealApps:
        missing = [n for n in self.names if n not in APPS or not installed(n, self.root)]
        if missing:
            raise RuntimeError(f"not installed: {', '.join(missing)} (python holdout/realapps/install.py --apps "
                               f"{','.join(missing)})")
        self._tmp = tempfile.TemporaryDirectory(prefix="realapps-")
        try:
            for name in self.names:
                self._start_one(name)
        except BaseException:
            self.close()
            raise
        return self

    def _start_one(self, name: str) -> None:
        run_dir = Path(self._tmp.name) / name
        run_dir.mkdir()
        port = free_port()
        launch = APPS[name].launch(self.root / name, port, run_dir)
        output = launch.log if launch.log_is_output else run_dir / "output.log"
        out = open(output, "ab")
        self._files.append(out)
        # XDG_RUNTIME_DIR: where a server keeps its sockets (gunicorn 25's control socket; else
        # in ~/.gunicorn), in the run directory removed at the end
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_RUNTIME_DIR": str(run_dir), **launch.env}
        process = subprocess.Popen(launch.argv, cwd=launch.cwd or run_dir, env=env, stdout=out,
                                   stderr=subprocess.STDOUT,
                                   stdin=subprocess.PIPE if launch.stdin_pipe else subprocess.DEVNULL,
                                   start_new_session=True)
        self.running[name] = running = Running(name, f"http://{HOST}:{port}", launch.log, process, output)
        _wait_ready(running, launch.ready, self.timeout)

    def stop(self) -> None:
        """Stop the servers; their logs stay readable (lighttpd writes its buffered lines now)
        until the ``with`` block ends or :meth:`close`."""
        for running in self.running.values():
            process = running.process
            if process.poll() is None:  # the app's own session: its workers and CGI children stop too
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            if process.stdin:
                process.stdin.close()
        for f in self._files:
            f.close()
        self._files = []

    def close(self) -> None:
        """Stop the servers and remove their run directories, logs included."""
        self.stop()
        self.running = {}
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> RealApps:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def marks(self) -> dict[str, int]:
        """App -> its log's length now (pass as ``since``)."""
        return {name: logs.size(r.log) for name, r in self.running.items()}

    def posts(self, name: str, since: int = 0) -> Counter:
        """Path -> POSTs (and PUT, PATCH, DELETE) the app's own log records since ``since``."""
        return logs.posts(self.running[name].log, since)

    def requests(self, name: str, since: int = 0) -> list[tuple[str, str]]:
        return logs.requests(self.running[name].log, since)

    def side_effect_posts(self, name: str, since: int = 0) -> Counter:
        """Path -> POSTs to the app's side-effect paths (``truth.toml``'s ``side_effect_posts``)."""
        patterns = load_truth_apps().get(name, {}).get("side_effect_posts", [])
        return Counter({path: n for path, n in self.posts(name, since).items() if matches(path, patterns)})

    def sources(self) -> list[dict]:
        """The ground truth's sources of the running apps, each with ``url`` (its start URL)."""
        return [{**s, "url": self.running[s["app"]].url(s["start"])} for s in load_truth()
                if s["app"] in self.running]


def load_truth(path: Path = TRUTH) -> list[dict]:
    """The ground truth's ``[[source]]`` entries."""
    with path.open("rb") as f:
        return tomllib.load(f)["source"]


def load_truth_apps(path: Path = TRUTH) -> dict[str, dict]:
    """The ground truth's ``[app.NAME]`` tables."""
    with path.open("rb") as f:
        return tomllib.load(f)["app"]


def matches(path: str, patterns: list[str]) -> bool:
    """``path`` is one of ``patterns``: exact paths, or prefixes ending in ``*``."""
    return any(path.startswith(p[:-1]) if p.endswith("*") else path == p for p in patterns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python holdout/realapps/serve.py",
                                     description="Run the installed real applications on 127.0.0.1 until Ctrl-C.")
    parser.add_argument("--apps", default="", help="comma-separated names (default: every installed app)")
    parser.add_argument("--seeds", default="", metavar="FILE", help="write every source's start URL here")
    args = parser.parse_args(argv)
    # SIGTERM stops the apps as Ctrl-C does, from the start: one that came while they started
    # would leave the started ones running (each in a session of its own) and their directory
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        apps = RealApps([n for n in args.apps.split(",") if n] or None).start()
    except RuntimeError as error:
        print(f"realapps: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # start() stopped what it had started
        return 0
    try:
        for name, running in apps.running.items():
            print(f"{name:12} {running.base}/  log {running.log}")
        sources = apps.sources()
        for s in sources:
            kind = "keyword_search member" if s["keyword_search"] else "not a member"
            effects = f"; side-effect forms: {', '.join(s.get('side_effect', []))}" if s.get("side_effect") else ""
            print(f"  {s['url']}  ({kind}{effects})")
        if args.seeds:
            Path(args.seeds).write_text("".join(s["url"] + "\n" for s in sources), encoding="utf-8")
        sys.stdout.flush()
        signal.pause()
    except KeyboardInterrupt:
        return 0
    finally:
        apps.close()


if __name__ == "__main__":
    sys.exit(main())
