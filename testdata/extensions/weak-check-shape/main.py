#!/usr/bin/env python3
"""weak-check-shape: a negative control that must fail checks/shape alone.

A good minimal package with one doctor check and one defect: the check
answers a status doctor does not know and a code that is not a stable
[a-z][a-z0-9_]* code.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("check.run")
def check_run(params):
    if params.get("check") != "weak-check-shape-health":
        raise pyproto.Refusal("undeclared", "check %r is not declared" % params.get("check"))
    # THE DEFECT: neither the status nor the code is one doctor reads.
    return {"status": "great", "code": "All-Good!", "detail": "everything is fine"}


if __name__ == "__main__":
    ext.run()
