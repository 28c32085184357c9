"""WebRACE's Scrapy commands (``COMMANDS_MODULE = "webrace.commands"``), and what every one
of them shares: a reader of its output that goes away (``| head``) ends it quietly.

Scrapy registers every ``ScrapyCommand`` subclass defined in this package as a command named
after its module, so what the commands share is a decorator here, not a base class.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

# What a shell reports for `seq 1000000 | head -1`'s seq: killed by SIGPIPE (128 + 13), so a
# script with `set -o pipefail` sees from us what it sees from any other program.
EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE

C = TypeVar("C", bound=type)


@contextmanager
def quiet_on_closed_pipe() -> Iterator[None]:
    """Run the block and flush stdout; if stdout's reader has gone, exit with
    ``EXIT_CLOSED_PIPE`` instead of a ``BrokenPipeError`` traceback. stdout is pointed at
    devnull first, so nothing left in its buffer tries the closed pipe again when Python
    exits (the recipe of the Python documentation's "Note on SIGPIPE")."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise SystemExit(EXIT_CLOSED_PIPE) from None


def ends_quietly_on_closed_pipe(cls: C) -> C:
    """Class decorator for every WebRACE command: its ``run`` under :func:`quiet_on_closed_pipe`."""
    run = cls.run

    @functools.wraps(run)
    def quiet_run(self: Any, args: list[str], opts: Any) -> None:
        with quiet_on_closed_pipe():
            run(self, args, opts)

    quiet_run.ends_quietly_on_closed_pipe = True
    cls.run = quiet_run
    return cls
