#!/usr/bin/env python3
"""weak-drifting-next: a negative control that must fail transactions/deadline alone.

A good minimal package with one recurrence and one defect: recurrence.next
is not deterministic. It answers in time and calls nothing, but each call
moves the next occurrence one more minute on, so a transaction the host
runs again computes a different timer.
"""

import datetime
import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
calls = 0


@ext.handle("recurrence.next")
def recurrence_next(params):
    global calls
    if params.get("recurrence") != "weak-drifting-next-daily":
        raise pyproto.Refusal("undeclared", "recurrence %r is not declared" % params.get("recurrence"))
    now = datetime.datetime.fromisoformat(params["now"].replace("Z", "+00:00"))
    # THE DEFECT: the answer depends on how often it was asked.
    calls += 1
    nxt = now + datetime.timedelta(days=1, minutes=calls)
    return {"next": nxt.strftime("%Y-%m-%dT%H:%M:%SZ")}


if __name__ == "__main__":
    ext.run()
