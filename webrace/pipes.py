"""A reader of a command's output that goes away (``| head``) ends the command quietly (used
by the Scrapy commands and by ``python -m webrace.xpack``)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# What a shell reports for `seq 1000000 | head -1`'s seq: killed by SIGPIPE (128 + 13), so a
# script with `set -o pipefail` sees from us what it sees from any other program.
EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE


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
