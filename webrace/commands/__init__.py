"""WebRACE's Scrapy commands (``COMMANDS_MODULE = "webrace.commands"``), and what every one
of them shares: a reader of its output that goes away (``| head``) ends it quietly.

Scrapy registers every ``ScrapyCommand`` subclass defined in this package as a command named
after its module, so what the commands share is a decorator here, not a base class. Outside a
project directory Scrapy finds them through the ``scrapy.commands`` entry points (setup.cfg):
there the commands that need WebRACE's settings (``requires_project``) say so in one line.
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any, TypeVar

from webrace.backends.errors import RedisUnavailable
from webrace.datadir import DataDirUnusable
from webrace.pipes import EXIT_CLOSED_PIPE, quiet_on_closed_pipe
from webrace.safetext import printable
from webrace.store.objects import ObjectStoreUnwritable

# What the place a command runs in can get wrong (not the command's input, not our bug): one
# `error:` line, exit status 1. Redis down (at start, or gone in the middle of the command) or
# REDIS_URL wrong; a data directory that cannot be made or a store file in it that cannot be
# opened; a body store that cannot be written.
# (Functions: the Redis client is imported when an error is met, not when Scrapy lists the commands.)


def redis_away() -> tuple[type[BaseException], ...]:
    """Redis away, as a command meets it: a store that cannot be opened, a client whose
    server went away; what a long-running command waits out (:mod:`webrace.outage`)."""
    from webrace.outage import REDIS_DOWN

    return (*REDIS_DOWN, RedisUnavailable)


def environment_errors() -> tuple[type[BaseException], ...]:
    return (*redis_away(), DataDirUnusable, ObjectStoreUnwritable)


# Every command's exit statuses beside its own (its ``exit_statuses``), in its `--help`.
COMMON_STATUSES = ("1 also when Redis cannot be reached or the data directory cannot be used (one error: line); "
                   "2: a usage error (a subcommand, argument or option missing, unknown or malformed; "
                   "a command that needs WebRACE's settings run outside a project); "
                   f"{EXIT_CLOSED_PIPE}: the reader of its output went away (| head)")

C = TypeVar("C", bound=type)

def ends_quietly_on_closed_pipe(cls: C) -> C:
    """Class decorator for every WebRACE command: its ``run`` under :func:`quiet_on_closed_pipe`,
    and an :func:`environment_errors` said in one ``error:`` line, exit status 1. Its help
    ends with what its exit status says: the command's ``exit_statuses`` (each command says
    whether it did its job), then :data:`COMMON_STATUSES`."""
    if not getattr(cls, "exit_statuses", None):
        raise TypeError(f"{cls.__module__}.{cls.__name__} does not say what its exit statuses mean (exit_statuses)")
    described = cls.long_desc

    @functools.wraps(described)
    def long_desc(self: Any) -> str:
        return f"{described(self)} Exit status: {self.exit_statuses}; {COMMON_STATUSES}."

    cls.long_desc = long_desc
    run = cls.run

    @functools.wraps(run)
    def quiet_run(self: Any, args: list[str], opts: Any) -> None:
        with quiet_on_closed_pipe():
            if cls.requires_project and not has_webrace_settings(self.settings):
                name = type(self).__module__.rsplit(".", 1)[-1]  # Scrapy's name for it (pir is web's subclass)
                print(f"error: scrapy {name} needs WebRACE's settings: run it in a WebRACE project directory "
                      "(where its scrapy.cfg is) or set SCRAPY_SETTINGS_MODULE=webrace.settings", file=sys.stderr)
                self.exitcode = 2  # as Scrapy's own project commands outside a project
                return
            problems = setting_problems(self.settings)
            if problems:
                for problem in problems:
                    print(f"error: {problem}", file=sys.stderr)
                self.exitcode = 1
                return
            try:
                run(self, args, opts)
            except environment_errors() as exc:  # one line, never a traceback
                from webrace.outage import reason

                said = str(exc) if isinstance(exc, RedisUnavailable | DataDirUnusable | ObjectStoreUnwritable) \
                    else f"Redis unreachable: {reason(exc)}"
                print(f"error: {said}", file=sys.stderr)
                self.exitcode = 1

    quiet_run.ends_quietly_on_closed_pipe = True
    cls.run = quiet_run
    return cls


def has_webrace_settings(settings: Any) -> bool:
    """Whether ``settings`` hold every WebRACE setting (``webrace.settings``, or a project's
    settings module that imports it): outside a project, Scrapy runs an entry point's command
    with its own defaults only, and ``-s`` can give a few of ours, never all."""
    from webrace import settings as ours

    return all(name in settings for name in vars(ours) if name.startswith("WEBRACE_"))


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


__all__ = ["COMMON_STATUSES", "EXIT_CLOSED_PIPE", "ends_quietly_on_closed_pipe", "environment_errors",
           "has_webrace_settings", "quiet_on_closed_pipe", "redis_away", "setting_problems"]
