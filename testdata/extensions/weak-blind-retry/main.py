#!/usr/bin/env python3
"""weak-blind-retry: a negative control that must fail kv/atomicity alone.

A good minimal package with one handler operation, idempotent on the
request ID, and one defect: it keeps a counter shared by every call, and
when its guarded update of the counter is refused as a conflict (another
call changed it first) it writes its value again without the
precondition, overwriting the other call's update. A good package reads
the counter again and retries the guarded batch.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("operation.call")
def operation_call(params):
    if params.get("operation") != "weak-blind-retry.count":
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    done_key = "request/" + (params.get("request_id") or "")
    done = ext.call("kv.get", {"namespace": ext.name, "key": done_key})
    if done.get("found"):
        return {"output": done.get("value")}
    counter = ext.call("kv.get", {"namespace": ext.name, "key": "counter"})
    count = (counter.get("value") or 0) + 1
    if counter.get("found"):
        pre = {"namespace": ext.name, "key": "counter", "version": counter.get("version")}
    else:
        pre = {"namespace": ext.name, "key": "counter", "absent": True}
    puts = [
        {"namespace": ext.name, "key": "counter", "value": count},
        {"namespace": ext.name, "key": done_key, "value": {"count": count}},
    ]
    try:
        ext.call("kv.commit", {"preconditions": [pre], "puts": puts})
    except pyproto.Refusal as refusal:
        if refusal.code != "conflict":
            raise
        # THE DEFECT: the same writes again, without the precondition and
        # without reading the counter again.
        ext.call("kv.commit", {"puts": puts})
    return {"output": {"count": count}}


if __name__ == "__main__":
    ext.run()
