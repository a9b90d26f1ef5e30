#!/usr/bin/env python3
"""weak-serve-before-init: a negative control that must fail wire/initialize-first alone.

A good minimal package with one background task and one defect: it gates
configure behind initialize, but serves task.run before initialize has
succeeded.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("task.run")
def task_run(params):
    if params.get("task") != "weak-serve-before-init-tick":
        raise pyproto.Refusal("undeclared", "task %r is not declared" % params.get("task"))
    return {"detail": "ticked"}


gated = ext.dispatch


def dispatch(method, params):
    # THE DEFECT: task.run is served whether or not initialize succeeded.
    if method == "task.run":
        return task_run(params)
    return gated(method, params)


ext.dispatch = dispatch

if __name__ == "__main__":
    ext.run()
