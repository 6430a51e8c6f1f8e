"""The store ops of worker/live/livestore.go for the tests' fake workers: one
dict per generation; a get waits for its key; a wait is bounded by its
timeout_ms and ends at once, superseded, once latest passed its generation."""

import base64
import threading
import time


class StoreOps:
    def __init__(self):
        self.data, self.latest = {}, 0
        self.cv = threading.Condition()

    def do(self, req):
        op, gen = req["op"], req.get("gen", 0)
        if gen < 1:
            return {"error": "%s: gen %d: want the generation being set up (>= 1)" % (op, gen)}
        with self.cv:
            d = self.data.setdefault(gen, {})
            k = req.get("key")
            if op == "store_set":
                d[k] = base64.b64decode(req["value"])
                self.cv.notify_all()
                return {}
            if op == "store_add":
                v = int(d.get(k, b"0")) + req["amount"]
                d[k] = str(v).encode()
                self.cv.notify_all()
                return {"num": v}
            if op == "store_cas":
                exp, new = base64.b64decode(req["expected"]), base64.b64decode(req["value"])
                cur = d.get(k)
                if (cur is None and exp == b"") or cur == exp:
                    d[k] = cur = new
                elif cur is None:
                    cur = exp
                return {"value": base64.b64encode(cur).decode()}
            if op in ("store_wait", "store_get"):
                keys = req["keys"] if op == "store_wait" else [k]
                end = time.monotonic() + req["timeout_ms"] / 1000
                while not all(x in d for x in keys):
                    if self.latest > gen:
                        return {"error": "%s: generation %d: a newer generation replaced it" % (op, gen), "superseded": True}
                    left = end - time.monotonic()
                    if left <= 0:
                        return {"error": "%s: generation %d: keys %r not set: Timeout" % (op, gen, keys)}
                    self.cv.wait(min(left, 0.005))
                if op == "store_get":
                    return {"value": base64.b64encode(d[k]).decode()}
                return {}
            if op == "store_check":
                return {"exists": all(x in d for x in req["keys"])}
            if op == "store_num_keys":
                return {"num": len(d)}
            if op == "store_delete":
                return {"exists": d.pop(k, None) is not None}
        return {"error": "unknown op %r" % op}
