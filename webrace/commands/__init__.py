"""WebRACE's Scrapy commands (``COMMANDS_MODULE = "webrace.commands"``), and what every one
of them shares: a reader of its output that goes away (``| head``) ends it quietly.

Scrapy registers every ``ScrapyCommand`` subclass defined in this package as a command named
after its module, so what the commands share is a decorator here, not a base class.
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any, TypeVar

from webrace.backends.errors import RedisUnavailable
from webrace.datadir import DataDirUnusable
from webrace.outage import REDIS_DOWN, reason
from webrace.pipes import EXIT_CLOSED_PIPE, quiet_on_closed_pipe
from webrace.safetext import printable
from webrace.store.objects import ObjectStoreUnwritable

# What the place a command runs in can get wrong (not the command's input, not our bug): one
# `error:` line, exit status 1. Redis down (at start, or gone in the middle of the command) or
# REDIS_URL wrong; a data directory that cannot be made or a store file in it that cannot be
# opened; a body store that cannot be written.
REDIS_AWAY = (*REDIS_DOWN, RedisUnavailable)  # what a long-running command waits out (webrace/outage.py)
ENVIRONMENT_ERRORS = (*REDIS_AWAY, DataDirUnusable, ObjectStoreUnwritable)

C = TypeVar("C", bound=type)

def ends_quietly_on_closed_pipe(cls: C) -> C:
    """Class decorator for every WebRACE command: its ``run`` under :func:`quiet_on_closed_pipe`,
    and an :data:`ENVIRONMENT_ERRORS` said in one ``error:`` line, exit status 1."""
    run = cls.run

    @functools.wraps(run)
    def quiet_run(self: Any, args: list[str], opts: Any) -> None:
        with quiet_on_closed_pipe():
            problems = setting_problems(self.settings)
            if problems:
                for problem in problems:
                    print(f"error: {problem}", file=sys.stderr)
                self.exitcode = 1
                return
            try:
                run(self, args, opts)
            except ENVIRONMENT_ERRORS as exc:  # one line, never a traceback
                said = str(exc) if isinstance(exc, RedisUnavailable | DataDirUnusable | ObjectStoreUnwritable) \
                    else f"Redis unreachable: {reason(exc)}"
                print(f"error: {said}", file=sys.stderr)
                self.exitcode = 1

    quiet_run.ends_quietly_on_closed_pipe = True
    cls.run = quiet_run
    return cls


def setting_problems(settings: Any) -> list[str]:
    """Settings whose value is no number where their default is one (``-s
    WEBRACE_KEEP_VERSIONS=abc``, ``-s CONCURRENT_REQUESTS=`` and 5,000 digits): one line each,
    before a reader deep in a command turns it into a traceback. A whole-number setting takes a
    decimal too (some are read as seconds with ``getfloat``), and True or False (Scrapy's flags
    may have 0 or 1 as default); a flag whose default is a bool is not checked."""
    from scrapy.settings import default_settings

    from webrace import settings as ours

    problems = []
    for name in sorted(settings):
        if not settings.getpriority(name):  # Scrapy's own default (reading a deprecated one warns)
            continue
        default = getattr(ours, name, getattr(default_settings, name, None))
        value = settings.get(name)
        if isinstance(default, bool) or not isinstance(default, int | float) or value is None:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            continue
        if not _number(value):
            problems.append(f"{name} must be a number, not {printable(repr(value), 60)}")
    return problems


def _number(value: Any) -> bool:
    if str(value).strip().lower() in ("true", "false"):  # a flag with a number as default (TELNETCONSOLE_ENABLED)
        return True
    try:
        int(value)
        return True
    except (TypeError, ValueError):
        pass
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


__all__ = ["ENVIRONMENT_ERRORS", "EXIT_CLOSED_PIPE", "REDIS_AWAY", "ends_quietly_on_closed_pipe",
           "quiet_on_closed_pipe", "setting_problems"]
