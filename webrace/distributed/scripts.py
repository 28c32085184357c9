"""Lua scripts in a Redis pipeline, in one round trip (the distributed frontier's).

redis-py's ``Pipeline``, given a registered ``Script`` (``script(..., client=pipe)``), asks
``SCRIPT EXISTS`` before every ``execute()``: one more round trip each time
(``Pipeline.load_scripts``, redis-py 5 to 8). Here the scripts go by ``EVALSHA`` and are
loaded only when Redis says it lacks one (``NOSCRIPT``: a Redis restarted or flushed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import redis


def pipeline_with_scripts(client: redis.Redis, fill: Callable[[Any], None],
                          scripts: Iterable[Any]) -> list[Any]:
    """The results of a pipeline that ``fill(pipe)`` queues, its scripts by :func:`evalsha`;
    on ``NOSCRIPT`` the ``scripts`` are loaded and the pipeline runs again, so ``fill`` must
    be safe to run twice (reads, and scripts: a ``NOSCRIPT`` call changed nothing)."""
    for attempt in (0, 1):
        pipe = client.pipeline(transaction=False)
        fill(pipe)
        results = pipe.execute(raise_on_error=False)
        if attempt or not any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            for result in results:
                if isinstance(result, Exception):
                    raise result
            return results
        for script in scripts:
            script.sha = client.script_load(script.script)
    raise AssertionError("unreachable")


def evalsha(pipe: Any, script: Any, keys: list[str], args: list[Any]) -> None:
    """Queue ``script`` on ``pipe`` by its digest, not registered with the pipeline (see
    :func:`pipeline_with_scripts`)."""
    pipe.evalsha(script.sha, len(keys), *keys, *args)


__all__ = ["evalsha", "pipeline_with_scripts"]
