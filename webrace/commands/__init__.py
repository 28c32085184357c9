"""WebRACE's Scrapy commands (``COMMANDS_MODULE = "webrace.commands"``), and what every one
of them shares: a reader of its output that goes away (``| head``) ends it quietly.

Scrapy registers every ``ScrapyCommand`` subclass defined in this package as a command named
after its module, so what the commands share is a decorator here, not a base class.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, TypeVar

from webrace.backends.errors import RedisUnavailable
from webrace.datadir import DataDirUnusable
from webrace.pipes import EXIT_CLOSED_PIPE, quiet_on_closed_pipe
from webrace.store.objects import ObjectStoreUnwritable

# What the place a command runs in can get wrong (not the command's input, not our bug): one
# `error:` line, exit status 1. Redis down or REDIS_URL wrong; a data directory that cannot be
# made or a store file in it that cannot be opened; a body store that cannot be written.
ENVIRONMENT_ERRORS = (RedisUnavailable, DataDirUnusable, ObjectStoreUnwritable)

C = TypeVar("C", bound=type)

def ends_quietly_on_closed_pipe(cls: C) -> C:
    """Class decorator for every WebRACE command: its ``run`` under :func:`quiet_on_closed_pipe`,
    and an :data:`ENVIRONMENT_ERRORS` said in one ``error:`` line, exit status 1."""
    run = cls.run

    @functools.wraps(run)
    def quiet_run(self: Any, args: list[str], opts: Any) -> None:
        with quiet_on_closed_pipe():
            try:
                run(self, args, opts)
            except ENVIRONMENT_ERRORS as exc:  # one line, never a traceback
                print(f"error: {exc}", file=sys.stderr)
                self.exitcode = 1

    quiet_run.ends_quietly_on_closed_pipe = True
    cls.run = quiet_run
    return cls


__all__ = ["ENVIRONMENT_ERRORS", "EXIT_CLOSED_PIPE", "ends_quietly_on_closed_pipe", "quiet_on_closed_pipe"]
