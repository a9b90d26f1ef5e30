#!/usr/bin/env python3
"""weak-refuse-input: a negative control that must fail operations/idempotent alone.

Its operation takes a ticket such as ABC-123, a rule its input schema
does not state, so every input certification builds from the schema is
refused; and for a valid ticket it records its effect under a fresh key
on every call, ignoring the request ID (the defect operations/idempotent
exists to catch). Before certification could not exercise an operation,
the check passed it with nothing observed.

Apart from that it behaves: configure records the entries it serves with
a guarded batch and reads again after a conflict, and a handler cancelled
while it reads its settings answers -32800.
"""

import os
import re
import sys
import uuid

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
TICKET = re.compile(r"^[A-Z]+-[0-9]+$")


@ext.handle("configure")
def configure(params):
    entries = sorted(e.get("id", "") for e in params.get("entries") or [])
    for _ in range(3):
        found = ext.call("kv.get", {"namespace": ext.name, "key": "entries"})
        if found.get("found"):
            pre = {"namespace": ext.name, "key": "entries", "version": found.get("version")}
        else:
            pre = {"namespace": ext.name, "key": "entries", "absent": True}
        try:
            ext.call("kv.commit", {"preconditions": [pre], "puts": [{"namespace": ext.name, "key": "entries", "value": entries}]})
            return {}
        except pyproto.Refusal as refusal:
            if refusal.code != "conflict":
                raise
            # Changed since the read: read again and retry.
    raise pyproto.Refusal("conflict", "the entries kept changing")


@ext.handle("operation.call")
def operation_call(params):
    if params.get("operation") != "weak-refuse-input.file":
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    ext.call("kv.get", {"namespace": ext.name, "key": "settings"})
    data = params.get("input") or {}
    ticket = data.get("ticket") if isinstance(data, dict) else None
    if not isinstance(ticket, str) or not TICKET.match(ticket):
        raise pyproto.Refusal("invalid", "input: ticket %r is not a ticket such as ABC-123" % (ticket,))
    # THE DEFECT: a new key per call; params["request_id"] is ignored.
    key = "item/" + uuid.uuid4().hex
    ext.call("kv.commit", {"puts": [{"namespace": ext.name, "key": key, "value": {"ticket": ticket}}]})
    return {"output": {"item": key}}


if __name__ == "__main__":
    ext.run()
