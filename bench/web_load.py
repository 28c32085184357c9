"""Benchmark: the web app under load with a long history (issue 46).

One data directory holds an owner with ``--acis`` ACIs (100,000) and ``--notes``
notifications (200), written straight through the store API; ``scrapy web serve`` (the real
command, waitress, default settings) serves it on 127.0.0.1, first on the code of ``--rev``
(default ``HEAD``, extracted with ``git archive``: the baseline, on a copy of the directory)
then on this checkout (the candidate), in the same run. wrk (``apt-get install wrk``) loads
the owner page (a session cookie), the API's list of ACIs (a bearer token) and the Atom feed
(the secret feed URL) with 1, 10 and 50 connections for ``--seconds`` each: p50 latency and
answered requests a second (2xx only; 503s counted apart). Then a burst of 200 connections
on the owner page for ``--burst`` seconds: a new client's first answer during it (status,
time), and, once it ends, the time until a new client gets the page (503s retried at once).

    python bench/web_load.py [--acis 100000] [--seconds 10] [--rev HEAD] [--png bench/web_load.png]

Goals (the candidate): p50 under 50 ms at 1 client and >= 50 requests/s at 50 clients on each
list; after the burst a new client answered within 1 s. Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from politeness import baseline_code  # noqa: E402 - bench/ is not a package

OWNER = "olive"
CLIENTS = (1, 10, 50)
BURST = 200
PROBE_LIMIT_S = 60.0  # a probe waits no longer for an answer
START = 1_700_000_000_000


@dataclass
class Point:
    code: str
    target: str
    clients: int
    p50_ms: float | None
    ok_per_s: float
    refused: int
    errors: int


def fill(data: Path, acis: int, notes: int) -> dict[str, str]:
    """The owner's ACIs and notifications, an account, its API token and secret feed URL."""
    from scrapy.settings import Settings

    from webrace.backends.sqlite import SqliteAciStore, SqliteSentinelStore
    from webrace.records.aci import Aci
    from webrace.sentinels.evaluate import Notification
    from webrace.web.accounts import open_accounts

    settings = Settings({"WEBRACE_DATA_DIR": str(data)})
    with SqliteAciStore(data / "aci.sqlite") as store:
        for start in range(0, acis, 2000):
            store.add_pages([[Aci(owner=OWNER, uri=f"http://news.test/{n}", relevance=2.0 + n % 7,
                                  updatetime=START + n * 60_000, filesize=4000 + n % 900, version=1 + n % 3,
                                  docbase=f"{n:064x}", summary=f"the summary of page {n}: java and exams",
                                  title=f"Page {n}")]
                              for n in range(start, min(start + 2000, acis))])
    with SqliteSentinelStore(data / "sentinels.sqlite") as store:
        store.add_notifications([Notification(sentinel=f"s{n % 5}", owner=OWNER, url=f"http://news.test/{n}",
                                              type="content", where="css:#news", changes={"added": [f"line {n}"]},
                                              before="before", after=f"after {n}", at=START + n * 3_600_000,
                                              version=n) for n in range(notes)])
    with open_accounts(settings) as accounts:
        accounts.add(OWNER, "olive-password-1")
        return {"token": accounts.new_token(OWNER), "feed": accounts.new_feed_token(OWNER)}


class Server:
    """`scrapy web serve --port 0` on ``data`` with ``code`` first on the path (None: this checkout)."""

    def __init__(self, data: Path, code: Path | None) -> None:
        env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(data)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code or ROOT), os.environ.get("PYTHONPATH")]))
        self.process = subprocess.Popen([sys.executable, "-m", "scrapy", "web", "serve", "--port", "0"],
                                        cwd=data.parent, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not found:
            self.stop()
            raise RuntimeError(f"scrapy web serve did not announce its address: {line!r}")
        self.port = int(found.group(1))
        threading.Thread(target=self.process.stdout.read, daemon=True).start()  # drain

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def request(self, path: str, headers: dict[str, str] | None = None, body: str | None = None,
                method: str = "GET", timeout: float = PROBE_LIMIT_S) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers={"Host": "127.0.0.1", **(headers or {})})
            response = conn.getresponse()
            response.body = response.read()
            return response
        finally:
            conn.close()

    def session_cookie(self) -> str:
        form = self.request("/login")
        cookie = form.getheader("Set-Cookie").split(";")[0]
        csrf = re.search(rb'name="csrf_token" value="([^"]+)"', form.body).group(1).decode()
        answer = self.request("/login", {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"},
                              f"username={OWNER}&password=olive-password-1&csrf_token={csrf}", "POST")
        if answer.status != 302:
            raise RuntimeError(f"login failed: {answer.status}")
        return answer.getheader("Set-Cookie").split(";")[0]

    def settle(self, path: str, headers: dict[str, str]) -> None:
        """Until the page is answered 200 (what an earlier point left queued is done)."""
        deadline = time.monotonic() + PROBE_LIMIT_S * 3
        while time.monotonic() < deadline:
            try:
                if self.request(path, headers).status == 200:
                    return
            except OSError:
                pass
        raise RuntimeError(f"{path} not answered 200 within {PROBE_LIMIT_S * 3:.0f} s")


def wrk(port: int, path: str, headers: dict[str, str], clients: int,
        seconds: float) -> tuple[float | None, float, int, int]:
    """(p50 ms, 2xx a second, non-2xx answers, socket errors and timeouts) of wrk's run."""
    args = ["wrk", "-t", str(min(clients, 2)), "-c", str(clients), "-d", f"{seconds:g}s", "--latency",
            "--timeout", "30s", *(a for k, v in headers.items() for a in ("-H", f"{k}: {v}")),
            f"http://127.0.0.1:{port}{path}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    p50 = re.search(r"^\s*50%\s+([\d.]+)(us|ms|s)\s*$", out, re.MULTILINE)
    p50_ms = None if p50 is None else float(p50.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[p50.group(2)]
    total = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", out)
    done = int(total.group(1))
    elapsed = float(total.group(2)) * {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60}[total.group(3)]
    refused = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    refused = int(refused.group(1)) if refused else 0
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = sum(int(e) for e in errors.groups()) if errors else 0
    if p50_ms is not None and done == refused:
        p50_ms = None  # only refusals were timed
    return p50_ms, (done - refused) / elapsed if elapsed else 0.0, refused, errors


def burst(server: Server, path: str, headers: dict[str, str], seconds: float) -> dict[str, float | int | str]:
    """200 connections for ``seconds``; a new client halfway (its first answer), and after."""
    args = ["wrk", "-t", "2", "-c", str(BURST), "-d", f"{seconds:g}s", "--timeout", "30s",
            *(a for k, v in headers.items() for a in ("-H", f"{k}: {v}")), f"http://127.0.0.1:{server.port}{path}"]
    load = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(seconds / 2)  # halfway through the burst (a moment of the load, not a synchronisation)
    during_status, during_s = probe(server, path, headers)
    load.wait()
    after_start = time.monotonic()
    first_status, first_s = probe(server, path, headers)
    status = first_status
    while status != 200 and time.monotonic() - after_start < PROBE_LIMIT_S:
        status, _ = probe(server, path, headers)
    return {"during_status": during_status, "during_s": during_s, "after_first_status": first_status,
            "after_first_s": first_s, "after_200_s": time.monotonic() - after_start if status == 200 else None}


def probe(server: Server, path: str, headers: dict[str, str]) -> tuple[int | str, float]:
    start = time.monotonic()
    try:
        status: int | str = server.request(path, headers).status
    except TimeoutError:
        status = "timeout"
    except OSError as exc:
        status = type(exc).__name__
    return status, time.monotonic() - start


def run(code_name: str, data: Path, code: Path | None, keys: dict[str, str], seconds: float,
        burst_s: float) -> tuple[list[Point], dict]:
    """Each point on a server of its own (the baseline's is still busy with what an overloaded
    point queued long after wrk stopped), warmed by one request."""
    points = []
    for target in ("owner page", "API list", "Atom feed"):
        for clients in CLIENTS:
            server = Server(data, code)
            try:
                path, headers = _target(server, target, keys)
                server.settle(path, headers)
                p50, rate, refused, errors = wrk(server.port, path, headers, clients, seconds)
            finally:
                server.stop()
            points.append(Point(code_name, target, clients, p50, rate, refused, errors))
            print(f"{code_name:9} {target:10} {clients:3} clients: p50 "
                  f"{'-' if p50 is None else f'{p50:.1f} ms':>10}, {rate:7.1f} answered/s, "
                  f"{refused} refused (503), {errors} socket errors/timeouts", flush=True)
    server = Server(data, code)
    try:
        path, headers = _target(server, "owner page", keys)
        server.settle(path, headers)
        after = burst(server, path, headers, burst_s)
    finally:
        server.stop()
    print(f"{code_name:9} burst of {BURST} for {burst_s:g} s: {after}", flush=True)
    return points, after


def _target(server: Server, target: str, keys: dict[str, str]) -> tuple[str, dict[str, str]]:
    if target == "owner page":
        return f"/owner/{OWNER}/", {"Cookie": server.session_cookie()}
    if target == "API list":
        return f"/api/v1/owners/{OWNER}/acis", {"Authorization": f"Bearer {keys['token']}"}
    return f"/feed/{keys['feed']}.atom", {}


def draw(points: list[Point], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for code, style in (("baseline", "--"), ("candidate", "-")):
        for target in ("owner page", "API list", "Atom feed"):
            mine = [p for p in points if p.code == code and p.target == target]
            axes[0].plot([p.clients for p in mine], [p.ok_per_s for p in mine], style, marker="o",
                         label=f"{code}: {target}")
            axes[1].plot([p.clients for p in mine], [p.p50_ms or float("nan") for p in mine], style, marker="o",
                         label=f"{code}: {target}")
    axes[0].set(xlabel="clients", ylabel="answered requests/s (2xx)", yscale="symlog", title="throughput")
    axes[1].set(xlabel="clients", ylabel="p50 latency (ms)", yscale="log", title="median latency")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xticks(CLIENTS, [str(c) for c in CLIENTS])
    axes[1].legend(fontsize=7)
    fig.suptitle("web app, an owner with 100,000 ACIs: baseline vs candidate")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acis", type=int, default=100_000)
    parser.add_argument("--notes", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load per point")
    parser.add_argument("--burst", type=float, default=10.0, help="seconds of the 200-client burst")
    parser.add_argument("--rev", default="HEAD", help="the baseline's revision")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--png", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    opts = parser.parse_args()
    if shutil.which("wrk") is None:
        print("error: wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="web-load-") as tmp:
        tmp = Path(tmp)
        started = time.monotonic()
        keys = fill(tmp / "candidate" / "data", opts.acis, opts.notes)
        print(f"filled {opts.acis:,} ACIs and {opts.notes} notifications in {time.monotonic() - started:.1f} s",
              flush=True)
        results = {}
        if not opts.no_baseline:
            shutil.copytree(tmp / "candidate", tmp / "baseline")
            results["baseline"] = run("baseline", tmp / "baseline" / "data", baseline_code(tmp, opts.rev), keys,
                                      opts.seconds, opts.burst)
        results["candidate"] = run("candidate", tmp / "candidate" / "data", None, keys, opts.seconds, opts.burst)
    points = [p for found, _ in results.values() for p in found]
    print("\nratios (candidate / baseline):")
    if "baseline" in results:
        for p in (p for p in points if p.code == "candidate"):
            base = next(b for b in points if b.code == "baseline" and (b.target, b.clients) == (p.target, p.clients))
            rate = f"{p.ok_per_s / base.ok_per_s:.0f}x" if base.ok_per_s else "baseline answered none"
            lat = f"{base.p50_ms / p.p50_ms:.0f}x faster" if base.p50_ms and p.p50_ms else "-"
            print(f"  {p.target:10} {p.clients:3} clients: answered/s {rate}, p50 {lat}")
    candidate = [p for p in points if p.code == "candidate"]
    after = results["candidate"][1]
    goals = {
        "p50 < 50 ms at 1 client": all(p.p50_ms is not None and p.p50_ms < 50 for p in candidate if p.clients == 1),
        ">= 50 answered/s at 50 clients": all(p.ok_per_s >= 50 for p in candidate if p.clients == 50),
        "a new client answered within 1 s after the burst": after["after_first_s"] < 1.0,
    }
    for goal, met in goals.items():
        print(f"goal {goal}: {'met' if met else 'MISSED'}")
    if opts.json:
        opts.json.write_text(json.dumps({"points": [p.__dict__ for p in points],
                                         "bursts": {k: v[1] for k, v in results.items()}}, indent=1))
    if opts.png:
        draw(points, opts.png)
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
