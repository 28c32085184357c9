"""The S3 object store (issue 47) on a real S3 API server (moto's, tests/s3server.py): what it
adds to the store contract (tests/test_store.py runs that on it), what a user gets wrong, and
two workers with no shared directory keeping their bodies in one bucket."""

from __future__ import annotations

import socket

import pytest
from scrapy.settings import Settings

from webrace.backends import SharedStoreMismatch, open_object_store
from webrace.backends.sqlite import SqliteMetaInfoStore
from webrace.store.cache import ObjectCache
from webrace.store.objects import ObjectStoreUnwritable, digest_of
from webrace.store.s3 import S3ObjectStore

STORE = "webrace.store.s3.S3ObjectStore"


def s3_settings(server, bucket: str, prefix: str = "crawl/", **extra) -> dict:
    return {"WEBRACE_OBJECT_STORE": STORE, "WEBRACE_S3_BUCKET": bucket, "WEBRACE_S3_PREFIX": prefix,
            "WEBRACE_S3_ENDPOINT_URL": server.url, "WEBRACE_S3_REGION": "us-east-1", **extra}


def set_args(settings: dict) -> list[str]:
    return [arg for name, value in settings.items() for arg in ("-s", f"{name}={value}")]


def keys(server, bucket: str) -> list[str]:
    listed = server.client().list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in listed.get("Contents", ()))


def test_bodies_go_under_content_addressed_keys_and_other_keys_are_never_listed_or_deleted(
        s3_server, s3_bucket, tmp_path):
    store = S3ObjectStore.from_settings(Settings(s3_settings(s3_server, s3_bucket, prefix="/team/crawl")))
    digest = store.put(b"a body")[0]
    assert digest == digest_of(b"a body")
    client = s3_server.client()
    for foreign in ("team/crawl/notes.txt", f"team/crawl/zz/{digest}.z", "team/crawl/ab/short.z", "elsewhere/x"):
        client.put_object(Bucket=s3_bucket, Key=foreign, Body=b"not ours")
    assert list(store.digests()) == [digest]
    with ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), store) as cache:
        assert cache.gc(keep=1, force=True).objects_deleted == 1  # the body nothing points to, nothing else
    assert keys(s3_server, s3_bucket) == ["elsewhere/x", "team/crawl/.webrace-store", "team/crawl/ab/short.z",
                                          "team/crawl/notes.txt", f"team/crawl/zz/{digest}.z"]


def test_a_write_finding_its_body_re_dates_it_by_a_copy_unless_it_was_re_dated_lately(s3_server, s3_bucket):
    store = S3ObjectStore(s3_server.client(), s3_bucket, "objects", refresh_after=900)
    digest = store.put(b"an unchanged page")[0]
    s3_server.date_back(s3_bucket, store.key(digest), 600)
    lately = store.mtime(digest)
    assert store.put(b"an unchanged page")[1] is False
    assert store.mtime(digest) == lately  # younger than refresh_after: no copy
    s3_server.date_back(s3_bucket, store.key(digest), 1200)
    before = len(s3_server.requests)
    assert store.put(b"an unchanged page")[1] is False
    assert store.mtime(digest) > lately  # copied onto itself: LastModified is now
    assert ("PUT", f"/{s3_bucket}/{store.key(digest)}") in s3_server.requests[before:]  # (CopyObject is a PUT)
    assert store.get(digest) == b"an unchanged page"


def test_a_bucket_that_cannot_be_used_is_one_line_naming_it_and_the_reason(s3_server, s3_bucket):
    def problem(**settings) -> str:
        with pytest.raises(ObjectStoreUnwritable) as info:
            S3ObjectStore.from_settings(Settings(s3_settings(s3_server, s3_bucket, **settings)))
        said = str(info.value)
        assert "\n" not in said and "secret" not in said
        return said

    assert problem(WEBRACE_S3_BUCKET=None) == ("WEBRACE_OBJECT_STORE is the S3 store but WEBRACE_S3_BUCKET is not "
                                               "set: name the bucket")
    assert problem(WEBRACE_S3_BUCKET="no-such-bucket-here") == (
        f"cannot use the object store s3://no-such-bucket-here/crawl/ at {s3_server.url}: the bucket does not "
        "exist (create it, or set WEBRACE_S3_BUCKET)")
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{unused.getsockname()[1]}"
    assert problem(WEBRACE_S3_ENDPOINT_URL=nobody, WEBRACE_S3_MAX_ATTEMPTS=2) == (
        f"cannot use the object store s3://{s3_bucket}/crawl/ at {nobody}: cannot connect to {nobody}")
    assert problem(WEBRACE_S3_ENDPOINT_URL="not a url").startswith("WEBRACE_S3_ENDPOINT_URL 'not a url' is not usable")
    s3_server.require_credentials(True)
    try:
        assert problem().endswith(": access denied (InvalidAccessKeyId): check the credentials and the bucket's "
                                  "policy")
    finally:
        s3_server.require_credentials(False)


def test_a_worker_pointed_at_another_bucket_or_prefix_is_refused(s3_server, s3_bucket, redis_url, redis_prefix):
    mode = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix}
    first = open_object_store(Settings({**mode, **s3_settings(s3_server, s3_bucket)}))  # names the store in Redis
    again = open_object_store(Settings({**mode, **s3_settings(s3_server, s3_bucket)}))
    assert first.identity() == again.identity()
    for other in (s3_settings(s3_server, s3_server.bucket()), s3_settings(s3_server, s3_bucket, prefix="other/")):
        with pytest.raises(SharedStoreMismatch, match="point WEBRACE_S3_BUCKET, WEBRACE_S3_PREFIX and "
                                                      "WEBRACE_S3_ENDPOINT_URL at the ones they use"):
            open_object_store(Settings({**mode, **other}))
