#!/usr/bin/env python3
"""weak-unbounded-queue: a negative control that must fail flow/overloaded alone.

A good minimal package with one handler operation, idempotent on the
request ID and careful with conflicts, and one defect: it serves one
request at a time and queues every request it reads meanwhile, without
bound, so it never answers overloaded. It keeps reading, so the answers
its handler waits for still arrive; a host with 64 requests in flight
waits on it instead of being told to back off.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
# THE DEFECT: no bound on the requests in flight.
ext.max_inflight = None


@ext.handle("operation.call")
def operation_call(params):
    if params.get("operation") != "weak-unbounded-queue.add":
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    return pyproto.record_once(ext, params)


if __name__ == "__main__":
    ext.run()
