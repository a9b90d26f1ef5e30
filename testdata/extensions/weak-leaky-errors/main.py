#!/usr/bin/env python3
"""weak-leaky-errors: a negative control that must fail wire/unauthored-internal alone.

A good minimal package with one handler operation, idempotent on the
request ID and careful with conflicts, and one defect: when a call to the
host fails in a way the handler did not foresee, it answers with the raw
text of that failure, so the host's detail (a path, a message meant for
the host's own log) crosses the wire. A good package answers internal
without it.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("operation.call")
def operation_call(params):
    if params.get("operation") != "weak-leaky-errors.add":
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    try:
        return pyproto.record_once(ext, params)
    except pyproto.HostRefusal as err:
        # THE DEFECT: the failure's own text becomes the answer.
        raise pyproto.Refusal("storage_failed", "recording the item failed: %s" % err.message)


if __name__ == "__main__":
    ext.run()
