"""Every message a test's program exchanges with a (fake) worker is
checked against worker/live/protocol.json."""

import pytest

import protocol_schema
from fakeworker import FakeWorker
from edl import protocol

_SCHEMA = protocol_schema.load()


@pytest.fixture(autouse=True)
def checked_protocol(monkeypatch):
    raw = protocol.Client.raw_call

    def checked(self, op, **fields):
        protocol_schema.check_request(_SCHEMA, dict(fields, op=op))
        rep = raw(self, op, **fields)
        protocol_schema.check_reply(_SCHEMA, op, rep)
        return rep

    monkeypatch.setattr(protocol.Client, "raw_call", checked)


@pytest.fixture
def worker(tmp_path, monkeypatch):
    def make(samples=20, partitions=3, fail_hello=None, initial_world=1):
        path = str(tmp_path / "edl.sock")
        w = FakeWorker(path, samples, partitions, fail_hello, initial_world)
        monkeypatch.setenv("EDL_SOCKET", path)
        return w
    return make
