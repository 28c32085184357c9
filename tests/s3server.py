"""A real S3 API server for the tests: moto's server mode (``moto[server]``), in a thread of the
test process, on a free port of 127.0.0.1; every test a bucket of its own.

The server keeps its objects in this process, so a test can date an object back (what
``os.utime`` does to a file of the directory store) to see gc's grace rule on S3 without
waiting for the clock."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

# The S3 clients of the tests (and of their `scrapy` subprocesses) sign with these; no
# credentials file or instance role is ever looked for.
AWS_ENV = {"AWS_ACCESS_KEY_ID": "webrace-test", "AWS_SECRET_ACCESS_KEY": "webrace-test-secret-never-printed",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


class S3Server:
    """moto's S3 in a thread (what ``moto.server.ThreadedMotoServer`` does), its writes one at a
    time: moto checks ``If-None-Match: *`` and then stores, two steps another request can come
    between, where S3 makes a conditional write atomic (the store relies on it). Reads are not
    held up."""

    def __init__(self) -> None:
        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
        app = DomainDispatcherApplication(create_backend_app)
        writing = threading.Lock()

        self.requests: list[tuple[str, str]] = []  # (method, path) of every request, in order

        def one_write_at_a_time(environ: dict, start_response: Any) -> Any:
            self.requests.append((environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")))
            if environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
                return app(environ, start_response)
            with writing:
                return list(app(environ, start_response))

        self.server = make_server("127.0.0.1", 0, one_write_at_a_time, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=30)

    def client(self) -> Any:
        from webrace.store.s3 import make_client

        return make_client(self.url, "us-east-1", max_attempts=2, timeout=10)

    def bucket(self) -> str:
        """A new bucket of its own."""
        name = f"webrace-test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def date_back(self, bucket: str, key: str, seconds: float) -> None:
        """The object's LastModified ``seconds`` earlier (the server's own record of it)."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        stored = backend.get_object(bucket, key)
        stored.last_modified = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=seconds)

    def require_credentials(self, required: bool) -> None:
        """Whether the server checks requests' credentials (moto's IAM check: it knows no user,
        so every request is refused with InvalidAccessKeyId)."""
        import requests

        answer = requests.post(f"{self.url}/moto-api/reset-auth", data=b"0" if required else b"inf", timeout=10)
        answer.raise_for_status()
