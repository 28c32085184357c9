"""The progress line (webrace/progress.py): on a terminal, one line rewritten in place while a
crawl runs, erased before every log line and at the end; in a pipe, none (tests/test_crawllog.py)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from conftest import urd

from webrace.progress import ERASE, progress_line


def test_the_line_says_pages_rate_queued_failed_and_time():
    stats = {"response_received_count": 1204, "scheduler/enqueued": 6600, "scheduler/dequeued": 1290,
             "webrace/failed/http_status": 2, "webrace/error/malformed": 1}
    assert progress_line(stats, 232.0, 4) == "Crawling: 1,204 pages (311/min), 5,314 queued, 3 failed, 0:03:52"
    assert progress_line({}, 0.0) == "Crawling: 0 pages (0/min), 0 queued, 0 failed, 0:00:00"


def read_until_exit(proc: subprocess.Popen, fd: int, seen: Callable[[str], object], deadline_s: float = 120) -> str:
    """Everything the process writes to its terminal, ``seen(text)`` called as it grows."""
    out, end = b"", time.monotonic() + deadline_s
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the terminal's other side is closed, the process is gone
                break
            if not chunk:
                break
            out += chunk
            seen(out.decode(errors="replace"))
        elif proc.poll() is not None:
            break
    return out.decode(errors="replace")


def test_on_a_terminal_the_line_is_redrawn_in_place_and_erased_before_the_summary(site, project):
    """A page the server holds back until the terminal has shown the line twice: the crawl is
    long enough for a refresh, with no sleep."""
    drawn_twice = threading.Event()

    def held() -> tuple[int, dict[str, str], bytes]:
        drawn_twice.wait(60)
        return 200, {"Content-Type": "text/html"}, b"<html><body><p>late</p></body></html>"

    site.html("/", ["/a.html", "/held.html"])
    site.html("/a.html")
    site.routes[(None, "/held.html")] = held
    project.add_urds(urd("u", "ann", site.url("/"), depth=1))
    primary, secondary = pty.openpty()
    args = project.crawl_args(project.root / "pages.jsonl", LOG_LEVEL="INFO")
    proc = subprocess.Popen([sys.executable, "-m", "scrapy", *args], cwd=project.root,
                            env={**project.env, "COLUMNS": "200"},
                            stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary)
    os.close(secondary)
    try:
        text = read_until_exit(proc, primary, lambda t: t.count(ERASE + "Crawling: ") >= 2 and drawn_twice.set())
    finally:
        drawn_twice.set()
        os.close(primary)
        proc.wait(timeout=60)
    assert proc.returncode == 0, text[-3000:]
    drawings = text.split(ERASE + "Crawling: ")[1:]
    assert len(drawings) >= 2 and all(" pages (" in d and " queued, " in d and " failed, " in d for d in drawings)
    # each drawing is taken off its line before anything else is written: no log line starts after it
    assert all("\n" not in d.split(ERASE, 1)[0] for d in drawings), drawings
    pages = [int(d.split(" pages", 1)[0].replace(",", "")) for d in drawings]
    assert pages == sorted(pages), drawings
    after = text.rsplit(ERASE + "Crawling: ", 1)[1]
    assert "WebRACE crawl summary (finished)" in after
