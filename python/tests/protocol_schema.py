"""worker/live/protocol.json, the live protocol described once, and the
checks the tests make with it: what python/edl sends (its source, and
every request at run time) and what it is answered (the fake workers'
replies, shaped as the Go worker shapes its own)."""

import ast
import json
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
EDL = TESTS.parent / "edl"
PATH = TESTS.parent.parent / "worker" / "live" / "protocol.json"
TYPES = {"int", "number", "bool", "string", "bytes", "int[]", "string[]", "progress", "metrics", "nonfinite"}


def load():
    return json.loads(PATH.read_text())


def field_type(desc):
    """The type of a field description ("int" or "int always")."""
    return desc.split()[0]


def _is(typ, v):
    if v is None:
        return True  # the zero value of any type
    if typ == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if typ == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if typ == "bool":
        return isinstance(v, bool)
    if typ in ("string", "bytes"):
        return isinstance(v, str)
    if typ == "progress":
        return isinstance(v, dict)
    if typ == "metrics":
        return isinstance(v, dict) and all(isinstance(k, str) and _is("number", e) and e is not None for k, e in v.items())
    if typ == "nonfinite":
        return isinstance(v, dict) and all(isinstance(k, str) and e in ("NaN", "Infinity", "-Infinity") for k, e in v.items())
    if typ == "int[]":
        return isinstance(v, list) and all(_is("int", e) for e in v)
    if typ == "string[]":
        return isinstance(v, list) and all(isinstance(e, str) for e in v)
    raise AssertionError("unknown type %r" % typ)


def check_request(schema, req):
    """Raises AssertionError when req is not a request of the schema."""
    op = req.get("op")
    assert op in schema["ops"], "op %r is not in protocol.json" % (op,)
    fields = schema["ops"][op]["request"]
    for k, v in req.items():
        if k == "op":
            continue
        assert k in fields, "%s: field %r is not in protocol.json" % (op, k)
        assert _is(field_type(fields[k]), v), "%s: field %r = %r is not of type %s" % (op, k, v, fields[k])


def check_reply(schema, op, rep):
    """Raises AssertionError when rep has a field op's reply lacks."""
    fields = dict(schema["reply_common"], **schema["ops"][op]["reply"])
    for k, v in rep.items():
        assert k in fields, "%s reply: field %r is not in protocol.json" % (op, k)
        assert _is(field_type(fields[k]), v), "%s reply: field %r = %r is not of type %s" % (op, k, v, fields[k])


def sent_in_source():
    """(op, fields, where) of every request in python/edl's source:
    Client.call / raw_call("op", field=...) and WorkerStore._call("op",
    ...), which adds gen."""
    out = []
    for path in sorted(EDL.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("call", "raw_call", "_call") and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                continue
            fields = {k.arg for k in node.keywords if k.arg}
            if node.func.attr == "_call":
                fields.add("gen")
            out.append((node.args[0].value, fields, "%s:%d" % (path.name, node.lineno)))
    return out
