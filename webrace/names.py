"""Owner names: one rule for every entry path (accounts, URDs' ``owner`` in urd.xsd, sentinels),
so no path accepts a name another refuses (``alice\\nroot``), and one form they are stored and
compared in (:func:`canonical_owner`), so that ``Alice``, ``alice`` and ``ａｌｉｃｅ`` are one
owner: one account, one login limit, the same URDs. Pure: no Scrapy."""

from __future__ import annotations

import re
import unicodedata

# the XSD's ``identifier`` type (webrace/schemas/urd.xsd), which URDs are validated against
OWNER_NAME = re.compile(r"[A-Za-z0-9._@+\-]{1,128}")
MAX_GIVEN = 512  # characters of a name as given; longer ones are refused before normalising


def canonical_owner(name: object) -> str | None:
    """``name`` in the one form owners are stored and compared in: Unicode NFKC, case folded
    (NFKC again after folding, Unicode's NFKC_Casefold), when that form follows the rule;
    None when it does not (then ``name`` is no owner name).

    The stored name is this form: there is no separate display case (``scrapy user add Alice``
    makes the account ``alice``), so every store can match owners by plain equality."""
    if not isinstance(name, str) or len(name) > MAX_GIVEN:
        return None
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return folded if OWNER_NAME.fullmatch(folded) else None


def is_owner_name(name: object) -> bool:
    return canonical_owner(name) is not None


def owner_name_problem(name: object) -> str | None:
    """Why ``name`` is no owner name (None: it is one, in :func:`canonical_owner`'s form)."""
    if is_owner_name(name):
        return None
    shown = repr(name)[:60]
    return f"not a valid owner name: {shown} (letters, digits and . _ @ + -, 1-128 characters)"


__all__ = ["OWNER_NAME", "canonical_owner", "is_owner_name", "owner_name_problem"]
