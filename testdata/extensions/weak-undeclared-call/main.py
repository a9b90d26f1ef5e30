#!/usr/bin/env python3
"""weak-undeclared-call: a negative control that must fail permissions/declared alone.

A good minimal package with one task and one defect: the task records a
telemetry event with telemetry.capture, a host method its manifest does
not enable (it asks for no telemetry.capture permission). The host
refuses it as undeclared; the task shrugs and reports success.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("task.run")
def task_run(params):
    if params.get("task") != "weak-undeclared-call-tick":
        raise pyproto.Refusal("undeclared", "task %r is not declared" % params.get("task"))
    try:
        # THE DEFECT: a method the manifest does not enable.
        ext.call("telemetry.capture", {"name": "weak.tick", "properties": {}})
    except pyproto.Refusal as refusal:
        pyproto.log("telemetry.capture refused: %s" % refusal.code)
    return {"detail": "ticked"}


if __name__ == "__main__":
    ext.run()
