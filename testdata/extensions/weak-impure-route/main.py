#!/usr/bin/env python3
"""weak-impure-route: a negative control that must fail routes/pure alone.

A good minimal package with one route handler that offers samples, and one
defect: route.match counts its calls in the host's KV (a kv.commit on
every decision) and says the count in its reason, so asked the same thing
twice it changes state and answers differently. A route decision must
depend on its input alone.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)

FAMILY = ext.name + ".note"
SCHEMA = ext.name + ".note.v1"
KIND = ext.name + "-review"


@ext.handle("route.samples")
def route_samples(params):
    if params.get("handler") != ext.name:
        raise pyproto.Refusal("undeclared", "route handler %r is not declared" % params.get("handler"))
    now = params.get("now")
    event = {
        "source": ext.name,
        "delivery_id": "sample@1",
        "family": FAMILY,
        "schema": SCHEMA,
        "payload": {"id": "sample", "title": "A sample note"},
    }
    if now:
        event["occurred_at"] = now
    return {"samples": [{"id": "new-note", "title": "A new note arrives", "event": event}]}


def count_call():
    # THE DEFECT: a write on every decision.
    got = ext.call("kv.get", {"namespace": ext.name, "key": "matches"})
    n = (got.get("value") or 0) + 1 if got.get("found") else 1
    pre = {"namespace": ext.name, "key": "matches"}
    if got.get("found"):
        pre["version"] = got.get("version")
    else:
        pre["absent"] = True
    ext.call("kv.commit", {"preconditions": [pre], "puts": [{"namespace": ext.name, "key": "matches", "value": n}]})
    return n


@ext.handle("route.match")
def route_match(params):
    if params.get("handler") != ext.name:
        raise pyproto.Refusal("undeclared", "route handler %r is not declared" % params.get("handler"))
    n = count_call()
    event = params.get("event") or {}
    if event.get("family") != FAMILY or event.get("schema") != SCHEMA:
        return {"match": False, "reason": "not a note (decision %d)" % n}
    payload = event.get("payload") or {}
    note_id = str(payload.get("id", "")) if isinstance(payload, dict) else ""
    return {
        "match": True,
        "kind": KIND,
        "correlation_keys": [ext.name + ":" + note_id],
        "reason": "note %s (decision %d)" % (note_id, n),
    }


if __name__ == "__main__":
    ext.run()
