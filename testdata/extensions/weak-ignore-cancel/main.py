#!/usr/bin/env python3
"""weak-ignore-cancel: a negative control that must fail cancellation/honoured alone.

A good minimal package with one handler operation, idempotent on the
request ID and careful with conflicts, and one defect: it ignores
$/cancel. A handler waiting for its kv.get when the host cancels the
request keeps waiting, and answers with a result once the host answers.
A good package stops: it answers the cancelled request -32800.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
# THE DEFECT: a $/cancel is noted and never acted on.
ext.honour_cancel = False


@ext.handle("operation.call")
def operation_call(params):
    if params.get("operation") != "weak-ignore-cancel.add":
        raise pyproto.Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
    return pyproto.record_once(ext, params)


if __name__ == "__main__":
    ext.run()
