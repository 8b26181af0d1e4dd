"""A real S3-compatible server on 127.0.0.1 for tests, reached through s3fs.

``s3_endpoint`` (session scope) starts moto's ``ThreadedMotoServer`` on a free port
of 127.0.0.1 — the approach of s3fs's own test-suite — and ``s3_bucket`` creates a
fresh bucket per test and yields its URL with the fsspec storage options that reach
it (key/secret "testing", ``client_kwargs.endpoint_url``). Import both into a test
module: ``from s3_server import s3_bucket, s3_endpoint  # noqa: F401``.
"""

from __future__ import annotations

import uuid

import pytest

CREDENTIALS = {"key": "testing", "secret": "testing"}


@pytest.fixture(scope="session")
def s3_endpoint():
    """``http://127.0.0.1:PORT`` of a moto S3 server running for the whole session."""
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")  # else bucket creation fails: InvalidLocationConstraint
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            yield f"http://{host}:{port}"
        finally:
            server.stop()


@pytest.fixture
def s3_bucket(s3_endpoint, monkeypatch):
    """(``s3://<fresh bucket>``, storage options) on the test server."""
    import s3fs

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    options = {**CREDENTIALS, "client_kwargs": {"endpoint_url": s3_endpoint}}
    fs = s3fs.S3FileSystem(**options)
    name = f"test-{uuid.uuid4().hex[:16]}"
    fs.mkdir(name)
    yield f"s3://{name}", options
