"""Where a long crawl's memory goes: an opt-in extension for finding leaks (``bench/soak.py``).

With ``WEBRACE_MEMORY_PROFILE=FILE`` the crawl traces its allocations (:mod:`tracemalloc`,
``WEBRACE_MEMORY_PROFILE_FRAMES`` frames each) and, every ``WEBRACE_MEMORY_PROFILE_INTERVAL``
seconds, appends to FILE the allocation sites that grew most since the first snapshot (taken
one interval after the start: the warm-up is not a leak), by traceback, and once more when the
crawl closes. Tracing slows the crawl and costs memory itself: a diagnostic, off by default.
"""

from __future__ import annotations

import gc
import logging
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from twisted.internet import task

logger = logging.getLogger(__name__)

TOP = 25  # allocation sites written per dump
# Allocations of the tracing itself and of the import machinery say nothing about the crawl.
IGNORED = (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
           tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"), tracemalloc.Filter(False, "<unknown>"))


class MemoryProfile:
    def __init__(self, path: Path, interval: float, frames: int) -> None:
        self.path, self.interval, self.frames = path, interval, frames
        self.baseline: tracemalloc.Snapshot | None = None
        self.started = time.monotonic()
        self.loop: task.LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> MemoryProfile:
        settings = crawler.settings
        target = settings.get("WEBRACE_MEMORY_PROFILE")
        if not target:
            raise NotConfigured  # off, as by default: nothing to say (Scrapy logs a reason as a warning)
        interval = settings.getfloat("WEBRACE_MEMORY_PROFILE_INTERVAL")
        if not interval > 0:
            raise NotConfigured("WEBRACE_MEMORY_PROFILE_INTERVAL must be more than 0 seconds")
        ext = cls(Path(target), interval, max(1, settings.getint("WEBRACE_MEMORY_PROFILE_FRAMES")))
        crawler.signals.connect(ext.engine_started, signal=signals.engine_started)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def engine_started(self) -> None:
        tracemalloc.start(self.frames)
        self.started = time.monotonic()
        self.loop = task.LoopingCall(self.dump)
        self.loop.start(self.interval, now=False).addErrback(
            lambda failure: logger.warning("Memory profile stopped: %s", failure.getErrorMessage()))
        logger.info("Tracing allocations: the sites that grow go to %s every %g s", self.path, self.interval)

    def spider_closed(self, spider: Any) -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        if tracemalloc.is_tracing():
            self.dump()
            tracemalloc.stop()

    def dump(self) -> None:
        snapshot = tracemalloc.take_snapshot().filter_traces(IGNORED)
        if self.baseline is None:
            self.baseline = snapshot
            self._write(f"== pid {os.getpid()} t={self._elapsed()} baseline snapshot "
                        f"({_mb(_total(snapshot))} traced)\n")
            return
        growth = snapshot.compare_to(self.baseline, "traceback")
        lines = [f"== pid {os.getpid()} t={self._elapsed()} traced {_mb(_total(snapshot))} "
                 f"(baseline {_mb(_total(self.baseline))}); collector: {len(gc.get_objects())} objects tracked, "
                 f"{gc.get_freeze_count()} frozen; top {TOP} growth since the baseline, by traceback"]
        for stat in growth[:TOP]:
            lines.append(f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks "
                         f"(now {stat.size / 1024:.1f} KiB in {stat.count} blocks)")
            lines += [f"        {line}" for line in stat.traceback.format(most_recent_first=True)]
        self._write("\n".join(lines) + "\n")

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.0f}s"

    def _write(self, text: str) -> None:
        try:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:
            logger.warning("Memory profile: cannot write %s: %s", self.path, exc.strerror or exc)


def _total(snapshot: tracemalloc.Snapshot) -> int:
    return sum(stat.size for stat in snapshot.statistics("filename"))


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB"


__all__ = ["MemoryProfile"]
