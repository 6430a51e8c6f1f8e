"""The protocol helpers: no torch needed."""

import os

import pytest

import edl

import protocol_schema
from edl import protocol


def test_meta_layout_matches_worker():
    # worker/core/block.go: blockCount 0, blockSwitch 1, blockStop 2, blockBlocked 3, blockHead 4, slotWidth 4
    assert (protocol.COUNT, protocol.SWITCH, protocol.STOP, protocol.BLOCKED, protocol.META_HEAD) == (0, 1, 2, 3, 4)
    assert protocol.meta_len(3) == 16


def test_fill_meta_writes_only_own_slot():
    meta = [0] * protocol.meta_len(3)
    share = {"part": 5, "start": 10, "end": 14, "first": 100, "fin": True, "leaving": True, "switch": True, "stop": False, "blocked": False}
    assert protocol.fill_meta(meta, 1, share) == 4
    assert meta[:4] == [4, 1, 0, 0]
    assert meta[4:8] == [0, 0, 0, 0] and meta[12:16] == [0, 0, 0, 0]
    assert meta[8:12] == [6, 10, 14, protocol.FLAG_LEAVING | protocol.FLAG_FIN]
    assert list(protocol.sample_ids(share)) == [110, 111, 112, 113]


def test_fill_meta_without_partition():
    meta = [0] * protocol.meta_len(2)
    assert protocol.fill_meta(meta, 0, {"part": -1, "start": 0, "end": 0, "stop": True}) == 0
    assert meta == [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert list(protocol.sample_ids({"part": -1})) == []


@pytest.mark.parametrize("batch,world,want", [(24, 1, [24]), (24, 2, [12, 12]), (25, 3, [9, 8, 8]), (2, 3, [1, 1, 1])])
def test_local_batch_fixed_global(batch, world, want):
    assert [protocol.local_batch(batch, world, r) for r in range(world)] == want


def test_exact_offsets_above_float32():
    # Offsets above 2**24 stay exact: the block travels as float64.
    import struct
    big = 2 ** 24 + 1
    assert struct.unpack("d", struct.pack("d", float(big)))[0] == big
    assert struct.unpack("f", struct.pack("f", float(big)))[0] != big


def test_client_reports_unreachable_worker(tmp_path):
    with pytest.raises(protocol.EdlError, match="cannot reach the edl worker"):
        protocol.Client(str(tmp_path / "none.sock"), connect_timeout=0.5)


def test_pip_install_as_a_library(tmp_path):
    # A user who prefers pip to PYTHONPATH: the package installs with
    # Debian's setuptools (no build dependency downloaded), with its
    # py.typed marker and the version from edl.__version__.
    import subprocess
    import sys
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                        "--target", str(target), here], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "edl" / "py.typed").exists()
    r = subprocess.run([sys.executable, "-c", "import edl, edl.protocol; print(edl.__version__, edl.protocol.__file__)"],
                       capture_output=True, text=True, cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=str(target)))
    assert r.returncode == 0, r.stderr
    version, path = r.stdout.split()
    assert version == edl.__version__ and path.startswith(str(target))


def test_protocol_schema_is_well_formed():
    schema = protocol_schema.load()
    assert schema["ops"], "no ops"
    for op, o in schema["ops"].items():
        for part in ("request", "reply"):
            for k, desc in o[part].items():
                words = desc.split()
                assert words[0] in protocol_schema.TYPES and words[1:] in ([], ["always"]), "%s %s %s: %r" % (op, part, k, desc)


def test_every_request_in_the_source_is_in_the_schema():
    # A field python/edl sends that protocol.json (and so the worker) lacks fails here.
    schema = protocol_schema.load()
    sent = protocol_schema.sent_in_source()
    assert len(sent) >= 10, sent
    for op, fields, where in sent:
        assert op in schema["ops"], "%s: op %r is not in protocol.json" % (where, op)
        extra = fields - set(schema["ops"][op]["request"])
        assert not extra, "%s: %s sends %s, not in protocol.json" % (where, op, sorted(extra))


def test_the_source_sends_every_op_and_field_of_the_schema():
    # An op or a request field protocol.json (and so the worker) has that
    # python/edl never sends fails here.
    schema = protocol_schema.load()
    sent = {}
    for op, fields, _ in protocol_schema.sent_in_source():
        sent.setdefault(op, set()).update(fields)
    for op, o in schema["ops"].items():
        assert op in sent, "python/edl never sends %r" % op
        missing = set(o["request"]) - sent[op]
        assert not missing, "python/edl sends %s without %s" % (op, sorted(missing))


def test_checks_catch_a_field_on_one_side_only():
    schema = protocol_schema.load()
    with pytest.raises(AssertionError, match="not in protocol.json"):
        protocol_schema.check_request(schema, {"op": "next", "gen": 1, "batch": 4, "size": 2})
    with pytest.raises(AssertionError, match="not of type int"):
        protocol_schema.check_request(schema, {"op": "next", "gen": 1, "batch": "4"})
    with pytest.raises(AssertionError, match="not in protocol.json"):
        protocol_schema.check_reply(schema, "latest", {"gen": 2, "applied": 3})
    protocol_schema.check_reply(schema, "store_get", {"error": "timeout", "superseded": True})
