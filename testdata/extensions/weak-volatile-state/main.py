#!/usr/bin/env python3
"""weak-volatile-state: a negative control that must fail lifecycle/durable-state alone.

A good minimal package with one handler operation and one defect: it
remembers which request IDs it has served in memory, not in its durable
state. A retry in the same process answers what the first call did and
writes nothing, as operations/idempotent requires; after a crash the
memory is gone, so the retry records its effect a second time. A good
package would keep the record of the request ID in host KV (or sync it to
its state directory) with the effect.
"""

import os
import sys
import uuid

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)

# THE DEFECT: the request IDs served live only as long as this process.
served = {}


@ext.handle("operation.call")
def operation_call(params):
    if params.get("operation") != "weak-volatile-state.add":
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    request_id = params.get("request_id", "")
    if request_id and request_id in served:
        return served[request_id]
    data = params.get("input") or {}
    title = data.get("title", "") if isinstance(data, dict) else ""
    key = "item/" + uuid.uuid4().hex
    record = {"title": title, "scope_id": (params.get("authority") or {}).get("scope_id", "")}
    ext.call(
        "kv.commit",
        {
            "preconditions": [{"namespace": ext.name, "key": key, "absent": True}],
            "puts": [{"namespace": ext.name, "key": key, "value": record}],
        },
    )
    answer = {"output": {"item": key}}
    if request_id:
        served[request_id] = answer
    return answer


if __name__ == "__main__":
    ext.run()
