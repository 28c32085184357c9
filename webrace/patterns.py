"""Regular expressions an owner writes (sentinel patterns, ``--ignore`` rules), compiled with
google-re2: matching takes time linear in the text whatever the pattern, so one owner's
``(a+)+$`` cannot stall a crawl that evaluates every owner's sentinels (Python's ``re``
backtracks: 29 ``a`` and a ``!`` took 87 s). RE2 has no backreferences or lookaround; such a
pattern is refused when it is added, with RE2's reason. Pure: no Scrapy.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

MAX_PATTERN = 1000  # characters of one pattern
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print its parse errors on stderr: they are raised instead
_OPTIONS.max_mem = 8 << 20  # bytes for one compiled pattern (RE2's default): a larger program is refused


class PatternError(ValueError):
    pass


@lru_cache(maxsize=512)
def compile_pattern(text: str) -> Any:
    """``text`` compiled with RE2 (cached); a :class:`PatternError` saying why it cannot be."""
    if len(text) > MAX_PATTERN:
        raise PatternError(f"a pattern of {len(text):,} characters (at most {MAX_PATTERN:,})")
    try:
        return re2.compile(text, options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise PatternError(f"not a valid regular expression for RE2 ({str(reason)[:120]}; RE2 has no backreferences or "
                           "lookaround)") from None


__all__ = ["MAX_PATTERN", "PatternError", "compile_pattern"]
