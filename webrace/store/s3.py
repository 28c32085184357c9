"""Bodies in an S3-compatible bucket, so that workers on machines with no shared filesystem
share one store (``WEBRACE_OBJECT_STORE = "webrace.store.s3.S3ObjectStore"``).

The same content-addressed objects as the directory store (:class:`ObjectStore`), one object
a body: ``PREFIX/ab/abcdef....z`` holds the zlib-compressed (or XPack-encoded) body whose
SHA-256 is ``abcdef...``. Through boto3 (``pip install 'webrace[s3]'``), so AWS S3 and the
servers that speak its API (MinIO, Ceph, Garage, SeaweedFS, moto...) all do.

- **No partial object**: an S3 PUT is atomic; an object is visible whole or not at all, so a
  killed worker leaves nothing to sweep.
- **Stored once**: a new body is written with a conditional PUT (``If-None-Match: *``), which
  the server refuses when the key exists: two workers storing one body at once store it once.
  A server that does not support it (``501 Not Implemented``) gets a HEAD, then a plain PUT:
  two writers may both write, harmlessly, since they write the same bytes.
- **gc's grace rule**: a write that finds its body present re-dates the object by copying it
  onto itself (a server-side ``CopyObject`` with new metadata: no bytes travel, and its
  ``LastModified`` becomes now), as the directory store touches the file's mtime; gc lists
  the objects and spares those whose ``LastModified`` is younger than its grace period. An
  object re-dated less than a quarter of the grace period ago is not copied again (one
  request fewer for each unchanged body), which leaves a writer three quarters of the grace
  period between finding the body and recording the version that points to it.
- **Identity**: ``PREFIX/.webrace-store`` holds the store's id (made by the first worker with
  the same conditional PUT), recorded in Redis, so a worker pointed at another bucket or
  prefix is refused before it stores anything.

Credentials come from boto3's usual chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE`` and ``~/.aws``, an instance or container role), never from WebRACE's
settings, and are never printed. Retries are botocore's (``standard`` mode,
``WEBRACE_S3_MAX_ATTEMPTS`` attempts in all). What the place gets wrong (an endpoint that does
not answer, a missing bucket, access denied, no credentials) is
:class:`ObjectStoreUnwritable`: one line naming the bucket and the reason, which the commands
say as their error and a crawl as its stop (or, a worker, waits out).

Use a bucket without versioning (or with a lifecycle rule expiring noncurrent versions):
with versioning, gc's deletes and the re-dating copies keep old versions, and their bytes.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

from webrace.safetext import printable
from webrace.store.objects import SUFFIX, CompressedObjects, ObjectMissing, ObjectStoreUnwritable

MARKER = ".webrace-store"
_NAME = re.compile(r"[0-9a-f]{2}/([0-9a-f]{64})" + re.escape(SUFFIX))
# the server's codes for a request it refuses to this client (its credentials or the bucket's policy)
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
           "InvalidClientTokenId", "AllAccessDisabled", "AccountProblem", "403", "Forbidden"}
_MISSING = {"NoSuchKey", "404", "NotFound"}


class S3ObjectStore(CompressedObjects):
    """Objects in ``bucket`` under ``prefix`` (``prefix/ab/abcdef....z``), through the boto3
    S3 ``client`` (thread-safe: the crawl's store threads share it)."""

    def __init__(self, client: Any, bucket: str, prefix: str = "", level: int = 6, refresh_after: float = 0.0,
                 endpoint: str | None = None) -> None:
        self.client, self.bucket, self.level = client, bucket, level
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.refresh_after = refresh_after  # seconds: a present object younger than this is not re-dated
        self.endpoint = endpoint
        self.conditional = True  # the server honours If-None-Match on PUT (until it says it does not)
        self._identity: str | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> S3ObjectStore:
        """``WEBRACE_S3_BUCKET`` (required), ``WEBRACE_S3_PREFIX``, ``WEBRACE_S3_ENDPOINT_URL``,
        ``WEBRACE_S3_REGION``, ``WEBRACE_S3_MAX_ATTEMPTS``, ``WEBRACE_S3_TIMEOUT``. The store's
        id is read (or made) at once, so a bucket that cannot be used is said before a crawl
        sends any request."""
        bucket = settings.get("WEBRACE_S3_BUCKET")
        if not bucket:
            raise ObjectStoreUnwritable("WEBRACE_OBJECT_STORE is the S3 store but WEBRACE_S3_BUCKET is not set: "
                                        "name the bucket")
        endpoint = settings.get("WEBRACE_S3_ENDPOINT_URL") or None
        client = make_client(endpoint, settings.get("WEBRACE_S3_REGION") or None,
                             max_attempts=settings.getint("WEBRACE_S3_MAX_ATTEMPTS", 3),
                             timeout=settings.getfloat("WEBRACE_S3_TIMEOUT", 20.0))
        store = cls(client, str(bucket), settings.get("WEBRACE_S3_PREFIX") or "",
                    refresh_after=settings.getfloat("WEBRACE_STORE_GC_GRACE", 3600.0) / 4, endpoint=endpoint)
        store.identity()
        return store

    @property
    def where(self) -> str:
        """The store, as the error lines and the shared-store check name it."""
        place = f"s3://{self.bucket}/{self.prefix}"
        return f"{place} at {self.endpoint}" if self.endpoint else place

    share_hint = "point WEBRACE_S3_BUCKET, WEBRACE_S3_PREFIX and WEBRACE_S3_ENDPOINT_URL at the ones they use"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where!r})"

    def key(self, digest: str) -> str:
        return f"{self.prefix}{digest[:2]}/{digest}{SUFFIX}"

    # -- reads -------------------------------------------------------------------------------

    def _load(self, digest: str) -> bytes:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key(digest))
            return answer["Body"].read()
        except Exception as exc:
            if _code(exc) in _MISSING:
                raise ObjectMissing(digest) from None
            raise self._unusable(exc) from None

    def _head(self, key: str) -> dict | None:
        """The object's HEAD answer, or None when there is none."""
        try:
            return self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _code(exc) in _MISSING:
                return None
            raise self._unusable(exc) from None

    def exists(self, digest: str) -> bool:
        return self._head(self.key(digest)) is not None

    def mtime(self, digest: str) -> float | None:
        head = self._head(self.key(digest))
        return None if head is None else head["LastModified"].timestamp()

    def digests(self) -> Iterator[str]:
        """The stored objects, listed (keys under the prefix that are not objects are skipped)."""
        start = len(self.prefix)
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
                for item in page.get("Contents", ()):
                    found = _NAME.fullmatch(item["Key"], start)
                    if found and item["Key"][start:start + 2] == found.group(1)[:2]:
                        yield found.group(1)
        except Exception as exc:
            raise self._unusable(exc) from None

    # -- writes ------------------------------------------------------------------------------

    def _claim(self, digest: str) -> bool:
        """Whether the object is stored; when it is, and its ``LastModified`` is older than
        ``refresh_after``, it is copied onto itself (server side) to re-date it, so a gc
        running now spares it (see the module's docstring)."""
        key = self.key(digest)
        head = self._head(key)
        if head is None:
            return False
        if time.time() - head["LastModified"].timestamp() < self.refresh_after:
            return True
        try:
            self.client.copy_object(Bucket=self.bucket, Key=key, CopySource={"Bucket": self.bucket, "Key": key},
                                    MetadataDirective="REPLACE", Metadata={"claimed": f"{time.time():.0f}"})
        except Exception as exc:
            if _code(exc) in _MISSING:  # deleted (by a gc) since the HEAD: written again
                return False
            raise self._unusable(exc) from None
        return True

    def _write(self, digest: str, data: bytes, replace: bool, durable: bool = True) -> bool:
        """One PUT (atomic; durable once the server answers, whatever ``durable``): conditional
        unless ``replace``, so an object another writer stored first is kept."""
        return self._put(self.key(digest), data, exclusive=not replace)

    def _put(self, key: str, data: bytes, exclusive: bool) -> bool:
        """``data`` under ``key``; with ``exclusive``, False (and nothing written) when it exists."""
        try:
            if exclusive and self.conditional:
                try:
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*")
                    return True
                except Exception as exc:
                    code = _code(exc)
                    if code in ("PreconditionFailed", "412"):  # another writer's copy is there: stored once
                        return False
                    if code in ("NotImplemented", "501"):  # a server without conditional writes
                        self.conditional = False
                    elif code not in ("ConditionalRequestConflict", "409"):  # (409: a write of it in flight)
                        raise
            if exclusive and self._head(key) is not None:
                return False
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
            return True
        except ObjectStoreUnwritable:
            raise
        except Exception as exc:
            raise self._unusable(exc) from None

    def delete(self, digest: str) -> int:
        """Remove an object; return the bytes freed (0 if it was not there)."""
        key = self.key(digest)
        head = self._head(key)
        if head is None:
            return 0
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _code(exc) in _MISSING:
                return 0
            raise self._unusable(exc) from None
        return int(head.get("ContentLength", 0))

    def sweep(self, grace: float = 0.0) -> int:
        return 0  # a PUT leaves no temporary object behind (multipart uploads are not used)

    def identity(self) -> str:
        """The store's id (``PREFIX/.webrace-store``, made by the first worker to ask)."""
        if self._identity is None:
            key = f"{self.prefix}{MARKER}"
            found = self._read_marker(key)
            if found is None:
                self._put(key, (uuid.uuid4().hex + "\n").encode("ascii"), exclusive=True)  # the first one wins
                found = self._read_marker(key) or ""
            self._identity = found
        return self._identity

    def _read_marker(self, key: str) -> str | None:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read(200)
        except Exception as exc:
            if _code(exc) in _MISSING:
                return None
            raise self._unusable(exc) from None
        return body.decode("ascii", "replace").strip()

    # -- errors ------------------------------------------------------------------------------

    def _unusable(self, exc: Exception) -> Exception:
        """What went wrong, as one line (:class:`ObjectStoreUnwritable`); an exception that is
        neither the server's answer nor botocore's is our bug, and stays as it is."""
        reason = _reason(exc, self.endpoint)
        if reason is None:
            return exc
        return ObjectStoreUnwritable(f"cannot use the object store {self.where}: {reason}")


def make_client(endpoint: str | None, region: str | None, max_attempts: int = 3, timeout: float = 20.0) -> Any:
    """A boto3 S3 client of a session of its own (``standard`` retries, ``max_attempts`` in
    all; ``timeout`` seconds to connect and for each read). Raises ObjectStoreUnwritable
    when boto3 is missing or the endpoint is no URL."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise ObjectStoreUnwritable("the S3 object store needs boto3: pip install 'webrace[s3]'") from None
    config = Config(retries={"max_attempts": max(1, max_attempts), "mode": "standard"},
                    connect_timeout=timeout, read_timeout=timeout)
    try:
        return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=region, config=config)
    except ValueError as exc:  # botocore: "Invalid endpoint: ..."
        raise ObjectStoreUnwritable(f"WEBRACE_S3_ENDPOINT_URL {printable(repr(endpoint), 200)} is not usable: "
                                    f"{printable(str(exc), 200)}") from None


def _code(exc: Exception) -> str | None:
    """The S3 error code of a ClientError (``NoSuchKey``, ``404``...), else None."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    return str(response.get("Error", {}).get("Code") or response.get("ResponseMetadata", {}).get("HTTPStatusCode"))


def _reason(exc: Exception, endpoint: str | None) -> str | None:
    """One line for an error of the server or of the way to it; None for anything else. The
    server's own message is said only for codes not known here (an answer to a request signed
    with bad credentials is never quoted)."""
    from botocore import exceptions as boto

    there = endpoint or "the S3 endpoint"
    if isinstance(exc, boto.ClientError):
        code = _code(exc)
        if code == "NoSuchBucket":
            return "the bucket does not exist (create it, or set WEBRACE_S3_BUCKET)"
        if code in _DENIED:
            return f"access denied ({code}): check the credentials and the bucket's policy"
        message = exc.response.get("Error", {}).get("Message") or ""
        return f"{code}: {printable(message, 200)}" if message else f"the server answered {code}"
    if isinstance(exc, boto.NoCredentialsError | boto.PartialCredentialsError):
        return ("no AWS credentials found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, "
                "or an instance role)")
    if isinstance(exc, boto.EndpointConnectionError):
        return f"cannot connect to {there}"
    if isinstance(exc, boto.ConnectTimeoutError | boto.ReadTimeoutError):
        return f"{there} did not answer in time"
    if isinstance(exc, boto.ConnectionClosedError):
        return f"{there} closed the connection"
    if isinstance(exc, boto.BotoCoreError):
        return printable(str(exc), 200)
    return None


__all__ = ["MARKER", "S3ObjectStore", "make_client"]
