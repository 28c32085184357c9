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
import secrets
import stat
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
        try:
            data = self._load(digest)
        except ObjectCorrupt:  # unreadable as it is (a link, not a file)
            return False
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

    def links(self) -> list[str]:
        """Symbolic links found where objects go (a store of files): never followed."""
        return []


class ObjectStore(CompressedObjects):
    """Objects as files under ``root`` (``root/ab/abcdef....z``): a directory of this machine
    or one every worker mounts (``WEBRACE_OBJECTS_DIR``).

    Nothing follows a symbolic link out of the store (``root`` itself may be one: it is the
    configured place). Shards, objects and temporary files are reached through descriptors of
    their directories opened with ``O_NOFOLLOW``, so a link planted where a shard or an object
    goes (``objects/ab -> /home/x``) is never read, written or deleted through, even if it
    appears between a check and the act: gc lists and skips it (:meth:`links`), a read says
    the object is damaged (the crawl fetches the page again and the write replaces the link
    itself), a write into a linked shard stops with :class:`ObjectStoreUnwritable`."""

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

    @property
    def where(self) -> str:
        """The store, as the shared-store check names it."""
        return str(self.root)

    share_hint = "mount the shared directory and point WEBRACE_OBJECTS_DIR at it"

    def identity(self) -> str:
        """The store's id (``root/.webrace-store``, made on first use): workers sharing a
        store see the same id, so a worker that mounted something else can be told."""
        marker = ".webrace-store"
        try:
            with _Dir(self.root) as root:
                found = _read_text(marker, root.fd)
                if found is None:
                    with _Dir(self.tmp) as tmp:
                        self._make_identity(tmp.fd, root.fd, marker)
                    found = _read_text(marker, root.fd) or ""
                return found
        except ObjectCorrupt as exc:
            raise ObjectStoreUnwritable(f"cannot use the object store {self.root}: {marker} is {exc}") from None
        except OSError as exc:
            raise ObjectStoreUnwritable(_unwritable(self.root, exc)) from None

    @staticmethod
    def _make_identity(tmp: int, root: int, marker: str) -> None:
        import uuid

        fresh = _temporary(tmp, "id-")
        try:
            with os.fdopen(fresh.fd, "w", encoding="ascii") as out:
                out.write(uuid.uuid4().hex + "\n")
            try:
                os.link(fresh.name, marker, src_dir_fd=tmp, dst_dir_fd=root, follow_symlinks=False)
            except FileExistsError:  # the first worker's id wins
                pass
        finally:
            _unlink(fresh.name, tmp)

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}{SUFFIX}"

    def _load(self, digest: str) -> bytes:
        try:
            with _Dir(self.root / digest[:2]) as shard:
                return _read_file(f"{digest}{SUFFIX}", shard.fd)
        except FileNotFoundError:
            raise ObjectMissing(digest) from None
        except StoreLink as exc:
            raise ObjectCorrupt(f"{digest}: {exc.strerror}") from None
        except ObjectCorrupt as exc:
            raise ObjectCorrupt(f"{digest}: {exc}") from None

    def _write(self, digest: str, data: bytes, replace: bool, durable: bool = True) -> bool:
        name = f"{digest}{SUFFIX}"
        try:
            with _Dir(self.root / digest[:2], create=True) as shard:
                if not durable and not replace:
                    return self._write_in_place(shard.fd, name, data)
                with _Dir(self.tmp) as tmp:
                    return self._write_through(tmp.fd, shard.fd, name, data, replace, durable)
        except OSError as exc:
            raise ObjectStoreUnwritable(_unwritable(self.root, exc)) from None

    def _write_through(self, tmp: int, shard: int, name: str, data: bytes, replace: bool, durable: bool) -> bool:
        """``data`` to a temporary file, then linked (or, with ``replace``, renamed) to ``name``."""
        fresh = _temporary(tmp, name[:8])
        try:
            with os.fdopen(fresh.fd, "wb") as out:
                out.write(data)
                out.flush()
                if durable and self.fsync:
                    os.fsync(out.fileno())
            if replace or _is_link(name, shard):  # a link is no object: replaced, never written through
                os.replace(fresh.name, name, src_dir_fd=tmp, dst_dir_fd=shard)
                return True
            try:
                os.link(fresh.name, name, src_dir_fd=tmp, dst_dir_fd=shard, follow_symlinks=False)
            except FileExistsError:  # another writer got there first: stored once
                return False
            return True
        finally:
            _unlink(fresh.name, tmp)

    def _write_in_place(self, shard: int, name: str, data: bytes) -> bool:
        """An object whose loss is allowed (``durable=False``) goes straight to its name: no
        temporary file to create, link and unlink (two directory changes fewer, in the one
        ``tmp`` directory every writer shares). Created exclusively, so another writer's copy
        is never overwritten; a crash may leave it torn, which reads as corrupt, and the next
        ``put(repair=True)`` of it replaces it, as it would a lost one."""
        if _is_link(name, shard):
            _unlink(name, shard)  # the link itself, never what it points to
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o600, dir_fd=shard)  # 0600 as mkstemp's
        except FileExistsError:
            return False
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        except BaseException:
            _unlink(name, shard)
            raise
        return True

    def _stat(self, digest: str) -> os.stat_result | None:
        """The object's own file (never a link's target), or None when there is none."""
        try:
            with _Dir(self.root / digest[:2]) as shard:
                info = os.stat(f"{digest}{SUFFIX}", dir_fd=shard.fd, follow_symlinks=False)
        except (FileNotFoundError, StoreLink):
            return None
        return info if stat.S_ISREG(info.st_mode) else None

    def exists(self, digest: str) -> bool:
        return self._stat(digest) is not None

    def _claim(self, digest: str) -> bool:
        """Whether the object is stored, its time refreshed when it is: a gc running now
        (which spares objects younger than its grace period) then does not remove a body a
        writer is about to point a new version at. A link is not an object: False."""
        try:
            with _Dir(self.root / digest[:2]) as shard:
                name = f"{digest}{SUFFIX}"
                if not stat.S_ISREG(os.stat(name, dir_fd=shard.fd, follow_symlinks=False).st_mode):
                    return False
                try:
                    os.utime(name, dir_fd=shard.fd, follow_symlinks=False)
                except OSError:  # not ours to touch (read-only): existence is all that is asked
                    pass
                return True
        except (FileNotFoundError, StoreLink):
            return False

    def mtime(self, digest: str) -> float | None:
        info = self._stat(digest)
        return None if info is None else info.st_mtime

    def delete(self, digest: str) -> int:
        """Remove an object; return the bytes freed (0 if it was not there, or was a link:
        a link is left alone, and what it points to is never touched)."""
        name = f"{digest}{SUFFIX}"
        try:
            with _Dir(self.root / digest[:2]) as shard:
                info = os.stat(name, dir_fd=shard.fd, follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    return 0
                os.unlink(name, dir_fd=shard.fd)
        except (FileNotFoundError, StoreLink):
            return 0
        return info.st_size

    def digests(self) -> Iterator[str]:
        """The stored objects (regular files in shard directories; links skipped: :meth:`links`)."""
        for _, name, kind in self._entries():
            if kind == "file" and name.endswith(SUFFIX):
                yield name[: -len(SUFFIX)]

    def links(self) -> list[str]:
        """Symbolic links where shards, objects or temporary files go (relative to ``root``):
        never followed, never removed; gc counts them."""
        found = [name for name, kind in _scan(self.root) if kind == "link" and (len(name) == 2 or name == "tmp")]
        found += [f"{shard}/{name}" for shard, name, kind in self._entries() if kind == "link"]
        return found + [f"tmp/{name}" for name, kind in _scan(self.tmp) if kind == "link"]

    def _entries(self) -> Iterator[tuple[str, str, str]]:
        """(shard, name, kind) of every entry of every shard directory (not of a linked one)."""
        for shard, kind in _scan(self.root):
            if len(shard) == 2 and kind == "dir":
                for name, entry_kind in _scan(self.root / shard):
                    yield shard, name, entry_kind

    def sweep(self, grace: float = 0.0) -> int:
        """Remove temporary files left by interrupted writes, older than ``grace`` seconds
        (another worker may be writing the younger ones); return how many. A linked ``tmp``
        or a link in it is left alone."""
        removed = 0
        cutoff = time.time() - grace
        try:
            with _Dir(self.tmp) as tmp:
                for entry in list(os.scandir(tmp.fd)):
                    if not entry.name.endswith(".part"):
                        continue
                    try:
                        info = os.stat(entry.name, dir_fd=tmp.fd, follow_symlinks=False)
                        if stat.S_ISREG(info.st_mode) and info.st_mtime <= cutoff:
                            os.unlink(entry.name, dir_fd=tmp.fd)
                            removed += 1
                    except FileNotFoundError:
                        pass
        except (FileNotFoundError, StoreLink):
            pass
        return removed


class StoreLink(OSError):
    """A symbolic link (or a file) where the store keeps a directory of its own: not followed."""


class _Dir:
    """A descriptor of a directory of the store, opened without following a link (``create``:
    made first if missing). Raises :class:`StoreLink` for a link or a non-directory there."""

    def __init__(self, path: Path, create: bool = False) -> None:
        self.path, self.create = path, create
        self.fd = -1

    def __enter__(self) -> _Dir:
        if self.create:
            try:
                os.mkdir(self.path)
            except FileExistsError:
                pass
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise StoreLink(errno.ELOOP, f"{self.path} is a symbolic link or not a directory: the store follows "
                                             "no link out of it (remove it)") from None
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


class _Temporary:
    def __init__(self, fd: int, name: str) -> None:
        self.fd, self.name = fd, name


def _temporary(directory: int, prefix: str) -> _Temporary:
    """A new file (mode 0600, exclusive, as ``tempfile.mkstemp`` makes one) in ``directory``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        name = f"{prefix}{secrets.token_hex(6)}.part"
        try:
            return _Temporary(os.open(name, flags, 0o600, dir_fd=directory), name)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name")


def _read_text(name: str, directory: int) -> str | None:
    try:
        return _read_file(name, directory).decode("ascii", "replace").strip()
    except FileNotFoundError:
        return None


def _read_file(name: str, directory: int) -> bytes:
    """The bytes of the regular file ``name`` in ``directory``; a link or anything else there
    (a FIFO would block a read forever) is ObjectCorrupt."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ObjectCorrupt("a symbolic link in the store, not followed") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ObjectCorrupt("not a regular file, not read")
        return fh.read()


def _is_link(name: str, directory: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _unlink(name: str, directory: int) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        pass


def _scan(path: Path) -> list[tuple[str, str]]:
    """(name, kind: dir, file, link or other) of each entry of the directory ``path`` if it is
    one (not a link to one); nothing is followed."""
    found = []
    try:
        with _Dir(path) as directory:
            for entry in os.scandir(directory.fd):
                kind = ("link" if entry.is_symlink() else "dir" if entry.is_dir(follow_symlinks=False)
                        else "file" if entry.is_file(follow_symlinks=False) else "other")
                found.append((entry.name, kind))
    except (FileNotFoundError, StoreLink):
        pass
    return found


def _unwritable(root: Path, exc: OSError) -> str:
    reason = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
              errno.EROFS: "the filesystem is read-only", errno.EFBIG: "the file size limit is reached",
              }.get(exc.errno or 0, exc.strerror or str(exc))
    return f"cannot write to the object store {root}: {reason}"
