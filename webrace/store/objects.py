"""Content-addressed object store: each distinct body is kept once, zlib-compressed, in a
file named by the SHA-256 of the uncompressed body.

With ``WEBRACE_STORE_XPACK``, a body with an XML media type (``text/xml``, ``application/xml``,
``application/*+xml`` such as XHTML, RSS, Atom) that is well-formed is stored XPack-encoded
instead: smaller, and questioned without being unpacked (``scrapy store query``). XPack keeps
the document equal under canonical XML, not byte for byte, so reading it back gives the
document as XPack writes it; the digest stays the SHA-256 of the fetched bytes (a re-crawl
still recognises an unchanged body exactly) and the stored bytes are checked by XPack's
CRC-32s. Malformed XML and every other type are stored zlib-compressed, as without the
setting; an HTML page is never stored XPack-encoded (an HTML parser would read XML's
``<script/>`` differently).

Writes are atomic: the compressed body goes to a temporary file in the store, is flushed
and fsynced (``WEBRACE_STORE_FSYNC``: its bytes are on disk before any name points to them),
then linked into place under its name (``os.link``, which fails when the name
exists: two workers storing the same body at once store it once, and neither sees a partial
file; a repair replaces with ``os.replace``). A crash leaves at most a stray temporary file,
which :meth:`ObjectStore.sweep` removes once it is older than the grace period. Reads check
the hash, so a damaged file is reported, never returned.

The directory may be shared by every worker of the distributed mode (a network filesystem
mounted at ``WEBRACE_OBJECTS_DIR``): nothing in it is per process. A store that cannot be
written (full, read-only, gone) raises :class:`ObjectStoreUnwritable`, one line naming the
directory and the reason, after removing its temporary file.
"""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from webrace.datadir import objects_dir

if TYPE_CHECKING:
    from webrace.xpack import PackedDocument

# webrace.xpack.format.MAGIC, written out so that reading a body does not import XPack (and
# numpy) unless the body is XPack-encoded; tests/test_store.py checks that the two agree.
XPACK_MAGIC = b"XPK2"

SUFFIX = ".z"


class ObjectMissing(LookupError):
    """No object with this digest."""


class ObjectCorrupt(ValueError):
    """The stored file does not decompress to a body with its digest."""


class ObjectStoreUnwritable(OSError):
    """The object store cannot take a write (disk full, read-only, permissions, gone): the
    crawl stops with this one line rather than record pages whose bodies are not kept."""


def digest_of(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def is_xml_type(content_type: str | None) -> bool:
    """An XML media type (what ``WEBRACE_STORE_XPACK`` stores XPack-encoded)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media in ("text/xml", "application/xml") or (media.startswith("application/") and media.endswith("+xml"))


class CompressedObjects:
    """What every object store shares: zlib compression, content addressing, checked reads
    and cheap integrity checks. A store says how to load, write, list and delete the
    compressed bytes of a digest."""

    level = 6
    xpack = False  # store XML bodies XPack-encoded (WEBRACE_STORE_XPACK)

    def _load(self, digest: str) -> bytes:
        """The stored (compressed) bytes; raises ObjectMissing."""
        raise NotImplementedError

    def _write(self, digest: str, data: bytes, replace: bool, durable: bool = True) -> bool:
        """Store ``data`` atomically; False when it was there already (and not replaced).
        ``durable=False``: no fsync (what a crash loses is noticed and made again)."""
        raise NotImplementedError

    def put(self, body: bytes, digest: str | None = None, repair: bool = False,
            xml: bool = False, durable: bool = True) -> tuple[str, bool, int]:
        """Store ``body``; return its digest, whether it was written, and the CRC-32 of the
        stored bytes (for :meth:`intact`). With ``repair``, a stored copy that does not read
        back correctly is replaced. ``xml``: the body has an XML media type (XPack-encoded
        when the store says so and it is well-formed). ``durable=False`` skips the fsyncs,
        for objects whose loss is noticed and repaired (the meta-info's side objects)."""
        digest = digest or digest_of(body)
        present = self._claim(digest)
        replace = repair and present and not self._readable(digest)
        if present and not replace:
            return digest, False, self.checksum(digest)
        data = None
        if xml and self.xpack:
            from webrace.xpack import XPackError, pack

            try:
                data = pack(body)
            except XPackError:
                data = None  # not well-formed: kept byte for byte, zlib-compressed
        if data is None:
            data = zlib.compress(body, self.level)
        written = self._write(digest, data, replace, durable)
        return digest, written, zlib.crc32(data) if written else self.checksum(digest)

    def get(self, digest: str) -> bytes:
        """The body: byte for byte, or for an XPack-encoded one the document XPack unpacks
        (equal to the fetched one under canonical XML). Raises ObjectCorrupt if damaged."""
        data = self._load(digest)
        if data.startswith(XPACK_MAGIC):
            from webrace.xpack import XPackError, unpack

            try:
                return unpack(data)
            except XPackError as exc:
                raise ObjectCorrupt(f"{digest}: {exc}") from None
        try:
            body = zlib.decompress(data)
        except zlib.error as exc:
            raise ObjectCorrupt(f"{digest}: {exc}") from None
        if digest_of(body) != digest:
            raise ObjectCorrupt(f"{digest}: content does not match its digest")
        return body

    def packed(self, digest: str) -> PackedDocument | None:
        """The XPack document of an XPack-encoded object (its header and CRC-32s checked,
        nothing decompressed), or None for a zlib-compressed one."""
        data = self._load(digest)
        if not data.startswith(XPACK_MAGIC):
            return None
        from webrace.xpack import PackedDocument, XPackError

        try:
            doc = PackedDocument(data)
            doc.verify()
        except XPackError as exc:
            raise ObjectCorrupt(f"{digest}: {exc}") from None
        return doc

    def checksum(self, digest: str) -> int:
        """CRC-32 of the stored (compressed) bytes."""
        return zlib.crc32(self._load(digest))

    def intact(self, digest: str, crc: int | None = None) -> bool:
        """A cheap check for the crawl's hot path: the object exists (else ObjectMissing)
        and its CRC-32 is the one recorded when it was stored; without one, it must
        decompress (zlib's Adler-32 catches truncation and flipped bits)."""
        data = self._load(digest)
        if crc is not None:
            return zlib.crc32(data) == crc
        if data.startswith(XPACK_MAGIC):
            from webrace.xpack import PackedDocument, XPackError

            try:
                PackedDocument(data).verify()
            except XPackError:
                return False
            return True
        try:
            zlib.decompress(data)
        except zlib.error:
            return False
        return True

    def _readable(self, digest: str) -> bool:
        try:
            self.get(digest)
        except (ObjectMissing, ObjectCorrupt):
            return False
        return True

    def exists(self, digest: str) -> bool:
        raise NotImplementedError

    def _claim(self, digest: str) -> bool:
        """Whether the object is stored (a store with times refreshes its time)."""
        return self.exists(digest)

    def mtime(self, digest: str) -> float | None:
        """When the object was last stored or found present by a write (epoch seconds);
        None when the store does not know (then gc treats it as old)."""
        return None


class ObjectStore(CompressedObjects):
    """Objects as files under ``root`` (``root/ab/abcdef....z``): a directory of this machine
    or one every worker mounts (``WEBRACE_OBJECTS_DIR``)."""

    def __init__(self, root: str | Path, level: int = 6, fsync: bool = True) -> None:
        self.root = Path(root)
        self.level = level
        # fsync each body before it is named. The directory is not fsynced: a name a power
        # failure loses (ext4 commits its journal within seconds) is found missing by the
        # crawl's check and the page fetched again; the bytes under a name are never partial.
        self.fsync = fsync
        self.tmp = self.root / "tmp"
        try:
            self.tmp.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ObjectStoreUnwritable(_unwritable(self.root, exc)) from None

    @classmethod
    def from_settings(cls, settings: object) -> ObjectStore:
        """The store ``WEBRACE_OBJECT_STORE`` names by default: ``WEBRACE_OBJECTS_DIR``, else
        ``WEBRACE_DATA_DIR/objects``."""
        return cls(objects_dir(settings), fsync=settings.getbool("WEBRACE_STORE_FSYNC", True))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    def identity(self) -> str:
        """The store's id (``root/.webrace-store``, made on first use): workers sharing a
        store see the same id, so a worker that mounted something else can be told."""
        marker = self.root / ".webrace-store"
        try:
            return marker.read_text().strip()
        except FileNotFoundError:
            pass
        import uuid

        fresh = self.tmp / f"id-{uuid.uuid4().hex}.part"
        try:
            fresh.write_text(uuid.uuid4().hex + "\n")
            try:
                os.link(fresh, marker)  # the first worker's id wins
            except FileExistsError:
                pass
        except OSError as exc:
            raise ObjectStoreUnwritable(_unwritable(self.root, exc)) from None
        finally:
            fresh.unlink(missing_ok=True)
        return marker.read_text().strip()

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}{SUFFIX}"

    def _load(self, digest: str) -> bytes:
        try:
            return self.path(digest).read_bytes()
        except FileNotFoundError:
            raise ObjectMissing(digest) from None

    def _write(self, digest: str, data: bytes, replace: bool, durable: bool = True) -> bool:
        path = self.path(digest)
        if not durable and not replace:
            return self._write_in_place(path, data)
        tmp_name = None
        try:
            path.parent.mkdir(exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=self.tmp, prefix=digest[:8], suffix=".part")
            with os.fdopen(fd, "wb") as tmp:
                tmp.write(data)
                tmp.flush()
                if durable and self.fsync:
                    os.fsync(tmp.fileno())
            if replace:
                os.replace(tmp_name, path)
                tmp_name = None
                written = True
            else:
                try:
                    os.link(tmp_name, path)  # fails if another writer got there first: stored once
                    written = True
                except FileExistsError:
                    written = False
        except OSError as exc:
            raise ObjectStoreUnwritable(_unwritable(self.root, exc)) from None
        finally:
            if tmp_name is not None:
                Path(tmp_name).unlink(missing_ok=True)
        return written

    def _write_in_place(self, path: Path, data: bytes) -> bool:
        """An object whose loss is allowed (``durable=False``) goes straight to its name: no
        temporary file to create, link and unlink (two directory changes fewer, in the one
        ``tmp`` directory every writer shares). Created exclusively, so another writer's copy
        is never overwritten; a crash may leave it torn, which reads as corrupt, and the next
        ``put(repair=True)`` of it replaces it, as it would a lost one."""
        try:
            path.parent.mkdir(exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # as mkstemp's
            except FileExistsError:
                return False
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            except BaseException:
                path.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise ObjectStoreUnwritable(_unwritable(self.root, exc)) from None
        return True

    def exists(self, digest: str) -> bool:
        return self.path(digest).exists()

    def _claim(self, digest: str) -> bool:
        """Whether the object is stored, its time refreshed when it is: a gc running now
        (which spares objects younger than its grace period) then does not remove a body a
        writer is about to point a new version at."""
        path = self.path(digest)
        try:
            os.utime(path)
        except FileNotFoundError:
            return False
        except OSError:  # not ours to touch (read-only): existence is all that is asked
            return path.exists()
        return True

    def mtime(self, digest: str) -> float | None:
        try:
            return self.path(digest).stat().st_mtime
        except FileNotFoundError:
            return None

    def delete(self, digest: str) -> int:
        """Remove an object; return the bytes freed (0 if it was not there)."""
        path = self.path(digest)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        return size

    def digests(self) -> Iterator[str]:
        for path in self.root.glob(f"??/*{SUFFIX}"):
            yield path.name[: -len(SUFFIX)]

    def sweep(self, grace: float = 0.0) -> int:
        """Remove temporary files left by interrupted writes, older than ``grace`` seconds
        (another worker may be writing the younger ones); return how many."""
        removed = 0
        cutoff = time.time() - grace
        for path in self.tmp.glob("*.part"):
            try:
                if path.stat().st_mtime <= cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        return removed


def _unwritable(root: Path, exc: OSError) -> str:
    reason = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
              errno.EROFS: "the filesystem is read-only", errno.EFBIG: "the file size limit is reached",
              }.get(exc.errno or 0, exc.strerror or str(exc))
    return f"cannot write to the object store {root}: {reason}"
