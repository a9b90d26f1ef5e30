#!/usr/bin/env python3
"""weak-unclipped-display: a negative control that must fail routes/display alone.

A good minimal package with one route that declares a display, and one
defect: the display's title is the payload's title as it came, never cut
to one line of 200 bytes. A short one-line title keeps the limits; a long
or multi-line one breaks them.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
NAME = "weak-unclipped-display"


@ext.handle("route.match")
def route_match(params):
    if params.get("handler") != NAME:
        raise pyproto.Refusal("undeclared", "route handler %r is not declared" % params.get("handler"))
    event = params.get("event") or {}
    payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
    if event.get("family") != NAME + ".note" or event.get("schema"):
        return {"match": False, "reason": "not an unlabelled note"}
    title = str(payload.get("title") or "a note")
    # THE DEFECT: the title goes into the display unclipped.
    return {"match": True, "kind": NAME + "-review", "correlation_keys": ["note:" + str(payload.get("id", ""))],
            "display": {"title": title}}


if __name__ == "__main__":
    ext.run()
