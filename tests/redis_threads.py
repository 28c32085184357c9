"""A test add-on for the distributed worker (issue 23): records which thread sends each Redis
command while the engine runs, so a test can assert that the reactor thread sends none.

Enabled with ``-s ADDONS={"redis_threads.ReactorRedisCalls": 0}`` and
``-s WEBRACE_TEST_REDIS_CALLS=<file>``; on ``spider_closed`` it writes to that file
``{"reactor": [[command, stack], ...], "threads": {thread name: commands}}``. It wraps the
real client's methods (every command still goes to Redis).
"""

from __future__ import annotations

import json
import threading
import traceback
from collections import Counter

import redis
import redis.client
from scrapy import signals


class ReactorRedisCalls:
    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.reactor: threading.Thread | None = None
        self.on_reactor: list[list[str]] = []
        self.by_thread: Counter = Counter()

    def update_settings(self, settings) -> None:  # as an add-on: enable the extension
        settings.set_in_component_priority_dict("EXTENSIONS", ReactorRedisCalls, 900)

    @classmethod
    def from_crawler(cls, crawler) -> ReactorRedisCalls:
        ext = cls(crawler.settings.get("WEBRACE_TEST_REDIS_CALLS"))
        crawler.signals.connect(ext.engine_started, signal=signals.engine_started)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def _seen(self, names: list[str]) -> None:
        if self.reactor is None:
            return
        thread = threading.current_thread()
        self.by_thread[thread.name] += len(names)
        if thread is self.reactor:
            stack = "".join(traceback.format_stack(limit=12)[:-2])
            self.on_reactor += [[name, stack] for name in names]

    def engine_started(self) -> None:
        self.reactor = threading.current_thread()
        command, execute = redis.Redis.execute_command, redis.client.Pipeline.execute
        ext = self

        def execute_command(client, *args, **options):
            ext._seen([str(args[0])])
            return command(client, *args, **options)

        def pipeline_execute(pipe, *args, **kwargs):
            ext._seen([str(c[0][0]) for c in pipe.command_stack] or ["(empty pipeline)"])
            return execute(pipe, *args, **kwargs)

        redis.Redis.execute_command = execute_command
        redis.client.Pipeline.execute = pipeline_execute

    def spider_closed(self) -> None:
        reactor, self.reactor = self.reactor, None  # what follows the crawl is not recorded
        if self.path and reactor is not None:
            with open(self.path, "w", encoding="utf-8") as out:
                json.dump({"reactor": self.on_reactor, "threads": dict(self.by_thread)}, out)
