#!/usr/bin/env python3
"""weak-nonidempotent-op: a negative control that must fail operations/idempotent alone.

A good minimal package with one handler operation and one defect: the
operation records its effect under a fresh key on every call, ignoring the
request ID, so a retry of the same call records a second effect. A good
package would key the record by the request ID and answer a retry with
what the first call recorded.
"""

import os
import sys
import uuid

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("operation.call")
def operation_call(params):
    if params.get("operation") != "weak-nonidempotent-op.add":
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    data = params.get("input") or {}
    title = data.get("title", "") if isinstance(data, dict) else ""
    # THE DEFECT: a new key per call; params["request_id"] is ignored.
    key = "item/" + uuid.uuid4().hex
    record = {"title": title, "scope_id": (params.get("authority") or {}).get("scope_id", "")}
    ext.call(
        "kv.commit",
        {
            "preconditions": [{"namespace": ext.name, "key": key, "absent": True}],
            "puts": [{"namespace": ext.name, "key": key, "value": record}],
        },
    )
    return {"output": {"item": key}}


if __name__ == "__main__":
    ext.run()
