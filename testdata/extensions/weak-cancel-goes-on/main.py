#!/usr/bin/env python3
"""weak-cancel-goes-on: a negative control that must fail cancellation/honoured alone.

A good minimal package with one handler operation, idempotent on the
request ID and careful with conflicts, and one defect: when the host
cancels a request whose handler waits for its kv.get, the handler answers
-32800 as it should, but then goes on and makes its write anyway. The
answer says it stopped; the host call after $/cancel says it did not. A
good package's handler returns once it is cancelled.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


def record(key, output):
    ext.call(
        "kv.commit",
        {
            "preconditions": [{"namespace": ext.name, "key": key, "absent": True}],
            "puts": [{"namespace": ext.name, "key": key, "value": output}],
        },
    )


@ext.handle("operation.call")
def operation_call(params):
    if params.get("operation") != "weak-cancel-goes-on.add":
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    data = params.get("input") or {}
    title = data.get("title", "") if isinstance(data, dict) else ""
    key = "request/" + (params.get("request_id") or "")
    output = {"item": key, "title": title}
    try:
        found = ext.call("kv.get", {"namespace": ext.name, "key": key})
    except pyproto.Cancelled:
        # THE DEFECT: the cancelled request is answered, and the write made anyway.
        ext.send({"id": ext.serving, "error": {"code": pyproto.CANCELLED, "message": "cancelled", "data": {"code": "cancelled"}}})
        record(key, output)
        return pyproto.NO_ANSWER
    if found.get("found"):
        return {"output": found.get("value")}
    try:
        record(key, output)
    except pyproto.Refusal as refusal:
        if refusal.code != "conflict":
            raise
        # Another attempt recorded it first: answer what it recorded.
        found = ext.call("kv.get", {"namespace": ext.name, "key": key})
        return {"output": found.get("value")}
    return {"output": output}


if __name__ == "__main__":
    ext.run()
