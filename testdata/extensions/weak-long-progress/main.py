#!/usr/bin/env python3
"""weak-long-progress: a negative control that must fail wait/progress alone.

A good minimal package with one wait operation and one defect: when it
plans a Wait it also reports progress on it, a report of several lines and
far more than 120 bytes, where a progress line is one short line.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
OP = "weak-long-progress.await"


@ext.handle("operation.wait")
def operation_wait(params):
    if params.get("operation") != OP:
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    ticket = (params.get("input") or {}).get("ticket") or "none"
    work = (params.get("authority") or {}).get("work_id") or "work-" + str(ticket)
    try:
        # THE DEFECT: a progress report, not a progress line.
        ext.call("wait.progress", {"work_id": work, "progress": "checks:\n" + "\n".join("check %d pending" % i for i in range(40))})
    except pyproto.Refusal as refusal:
        pyproto.log("wait.progress refused: %s" % refusal.code)
    return {"wait": {"keys": ["ticket:" + str(ticket)], "description": "waiting for ticket %s" % ticket}}


if __name__ == "__main__":
    ext.run()
