"""Every message a test's program exchanges with a (fake) worker is
checked against worker/live/protocol.json."""

import pytest

import protocol_schema
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
