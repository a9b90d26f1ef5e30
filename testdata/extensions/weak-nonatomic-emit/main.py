#!/usr/bin/env python3
"""weak-nonatomic-emit: a negative control that must fail emissions/atomic alone.

A good minimal package with one emit operation declared with commit, and
one defect: the record of a publication, which names the emitted Event,
is written by a kv.commit of its own while operation.emit plans the
Event, before the Event exists, and emit.commit returns nothing. A good
package returns the record from emit.commit, so it commits in the same
transaction as the Event, or not at all.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)

OPERATION = ext.name + ".publish"
FAMILY = ext.name + ".note"
SCHEMA = ext.name + ".note.v1"


@ext.handle("operation.emit")
def operation_emit(params):
    if params.get("operation") != OPERATION:
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    data = params.get("input") or {}
    title = data.get("title", "") if isinstance(data, dict) else ""
    request_id = params.get("request_id") or ""
    if not request_id:
        raise pyproto.Refusal("invalid", "a publication needs a request ID")
    delivery_id = "publish/" + request_id
    event_id = pyproto.emitted_event_id(ext.name, delivery_id)
    draft = {
        "source": ext.name,
        "delivery_id": delivery_id,
        "scope_id": (params.get("authority") or {}).get("scope_id", ""),
        "family": FAMILY,
        "schema": SCHEMA,
        "payload": {"title": title},
    }
    # THE DEFECT: the record is committed here, on its own, before the
    # emission; a refused or failed emission leaves it behind.
    key = "published/" + event_id
    try:
        ext.call(
            "kv.commit",
            {
                "preconditions": [{"namespace": ext.name, "key": key, "absent": True}],
                "puts": [{"namespace": ext.name, "key": key, "value": {"event": event_id, "title": title}}],
            },
        )
    except pyproto.Refusal as r:
        if r.code != "conflict":
            raise
    return {"event": draft, "commit": {"key": key}, "output": {"event": event_id}}


@ext.handle("emit.commit")
def emit_commit(params):
    if params.get("operation") != OPERATION:
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    # Part of the defect: nothing is written with the Event.
    return {}


if __name__ == "__main__":
    ext.run()
