#!/usr/bin/env python3
"""weak-stray-stdout: a negative control that must fail lifecycle/stdout-hygiene alone.

A good minimal package with one background task and one defect: while
serving task.run it writes a debug line that is not JSON to its stdout,
where only protocol messages belong.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("task.run")
def task_run(params):
    if params.get("task") != "weak-stray-stdout-tick":
        raise pyproto.Refusal("undeclared", "task %r is not declared" % params.get("task"))
    # THE DEFECT: a stray, non-JSON line on the protocol's stdout.
    ext.write_raw_stdout("debug: tick at %s" % params.get("now", "?"))
    return {"detail": "ticked"}


if __name__ == "__main__":
    ext.run()
