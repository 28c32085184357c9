"""Channel URLs encrypted at rest: they hold owners' passwords and tokens (mail accounts,
webhook secrets). The delivery stores keep each URL as a Fernet token (``cryptography``:
AES-128-CBC with an HMAC), under a key that is not in the store:

- ``WEBRACE_DELIVERY_CHANNEL_KEY`` when set (a Fernet key): in the distributed mode, every
  process that adds channels or sends, on whatever machine, needs the same key;
- else the key in ``WEBRACE_DATA_DIR/channel-key``, beside the web app's ``web-secret-key``,
  made on first use (mode 0600).

A value that holds ``://`` is a URL stored before encryption: read as it is (the stores
rewrite it sealed). A token this key cannot open (another key) reads as None.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from webrace.datadir import data_dir

KEY_FILE = "channel-key"
MAKE_KEY = "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"


class ChannelKeyError(ValueError):
    """The channel key cannot be used: one line saying which and what to do."""


class ChannelCipher:
    def __init__(self, key: bytes | str) -> None:
        try:
            self.fernet = Fernet(key)
        except (ValueError, TypeError):
            raise ChannelKeyError(f"the channel key is not a Fernet key (44 characters of URL-safe base64: {MAKE_KEY})"
                                  ) from None

    def seal(self, url: str) -> str:
        return self.fernet.encrypt(url.encode()).decode("ascii")

    def open(self, value: str) -> str | None:
        """The URL ``value`` holds; None if this key cannot decrypt it."""
        if is_plain(value):
            return value
        try:
            return self.fernet.decrypt(value.encode("ascii")).decode()
        except (InvalidToken, UnicodeError):
            return None


def is_plain(value: str) -> bool:
    """A URL stored before encryption (a token never holds ``:`` or ``/``)."""
    return "://" in value


def channel_cipher(settings: Any) -> ChannelCipher:
    """The cipher of ``WEBRACE_DELIVERY_CHANNEL_KEY``, else of the data directory's key file."""
    key = settings.get("WEBRACE_DELIVERY_CHANNEL_KEY")
    if key:
        try:
            return ChannelCipher(key.strip() if isinstance(key, str) else key)
        except ChannelKeyError as exc:
            raise ChannelKeyError(f"WEBRACE_DELIVERY_CHANNEL_KEY: {exc}") from None
    path = data_dir(settings) / KEY_FILE
    if not path.exists():
        _make_key(path)
    try:
        return ChannelCipher(path.read_bytes().strip())
    except ChannelKeyError as exc:
        raise ChannelKeyError(f"{path}: {exc}; if the key is lost, the channels must be added again") from None


def _make_key(path: Any) -> None:
    """A new key in ``path``, mode 0600, whole or not at all: written to a temporary file and
    linked in place, so that of two processes making one at once, both use the first."""
    fd, temporary = tempfile.mkstemp(prefix=".channel-key-", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(Fernet.generate_key() + b"\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile: theirs is used
            os.link(temporary, path)
    finally:
        os.unlink(temporary)
