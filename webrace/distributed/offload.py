"""The threads of a distributed worker's Redis round trips (issue 23: no blocking network I/O
on the reactor thread).

A worker's calls to the shared rounds never run on the reactor: the reactor goes on
downloading and parsing while a call waits on Redis. The round engine's calls on fetched
pages (offering links, finishing pages, releasing items) run one after the other in one
thread (``webrace-redis``, the spider's), in the order the reactor made them, so the
engine's state stays single-threaded apart from the reactor's reads; the lease scheduler's
calls (leasing ahead, ending and renewing leases) in another (``webrace-leases``), so that
leases never wait behind a page's links. An item exists only once its page is finished, so
its lease ends after that. The embedded mode has no such thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads
from twisted.internet.defer import Deferred
from twisted.python.threadpool import ThreadPool

THREAD_NAME = "webrace-redis"


class RedisThread:
    def __init__(self, name: str = THREAD_NAME) -> None:
        self.name = name
        self._pool: ThreadPool | None = None

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred:
        """``fn(*args, **kwargs)`` in the Redis thread; its result (or failure) fires the
        returned Deferred on the reactor thread."""
        from twisted.internet import reactor  # the one Scrapy installed (never at import time)

        if self._pool is None:
            self._pool = ThreadPool(1, 1, name=self.name)
            self._pool.start()
        return threads.deferToThreadPool(reactor, self._pool, fn, *args, **kwargs)

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """As :meth:`run`, awaited (its exception raised here)."""
        return await maybe_deferred_to_future(self.run(fn, *args, **kwargs))

    def stop(self) -> None:
        """After the work it was given (waits for it); it starts again if given more."""
        if self._pool is not None:
            self._pool.stop()
            self._pool = None


__all__ = ["THREAD_NAME", "RedisThread"]
