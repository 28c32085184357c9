"""Owner names: one rule for every entry path (accounts, URDs' ``owner`` in urd.xsd, sentinels),
so no path accepts a name another refuses (``alice\\nroot``). Pure: no Scrapy."""

from __future__ import annotations

import re

# the XSD's ``identifier`` type (webrace/schemas/urd.xsd), which URDs are validated against
OWNER_NAME = re.compile(r"[A-Za-z0-9._@+\-]{1,128}")


def is_owner_name(name: object) -> bool:
    return isinstance(name, str) and OWNER_NAME.fullmatch(name) is not None


def owner_name_problem(name: object) -> str | None:
    """Why ``name`` is no owner name (None: it is one)."""
    if is_owner_name(name):
        return None
    shown = repr(name)[:60]
    return f"not a valid owner name: {shown} (letters, digits and . _ @ + -, 1-128 characters)"


__all__ = ["OWNER_NAME", "is_owner_name", "owner_name_problem"]
