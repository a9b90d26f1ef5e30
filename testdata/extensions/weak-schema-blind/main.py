#!/usr/bin/env python3
"""weak-schema-blind: a negative control that must fail schemas/readable alone.

A good minimal package with one route over its one family, whose payload
schema it writes at version 1, and one defect: route.match never looks at
the payload's schema label, so it decides on payloads it cannot read (a
newer version, a base it never declared) as if they were its own.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
NAME = "weak-schema-blind"


@ext.handle("route.match")
def route_match(params):
    if params.get("handler") != NAME:
        raise pyproto.Refusal("undeclared", "route handler %r is not declared" % params.get("handler"))
    event = params.get("event") or {}
    # THE DEFECT: event["schema"] is never checked against what it reads.
    if event.get("family") != NAME + ".note":
        return {"match": False, "reason": "another family"}
    return {"match": True, "kind": NAME + "-review", "correlation_keys": ["note:" + event.get("delivery_id", "")]}


if __name__ == "__main__":
    ext.run()
