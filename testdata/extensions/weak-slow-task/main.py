#!/usr/bin/env python3
"""weak-slow-task: a negative control that must fail tasks/interval alone.

A good minimal package with one task due every second and one defect: a
pass takes longer than that, so the next run is due before it ends.
"""

import time
import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("task.run")
def task_run(params):
    if params.get("task") != "weak-slow-task-tick":
        raise pyproto.Refusal("undeclared", "task %r is not declared" % params.get("task"))
    time.sleep(1.5)  # THE DEFECT: longer than the declared interval of 1s
    return {"detail": "ticked, late"}


if __name__ == "__main__":
    ext.run()
