#!/usr/bin/env python3
"""weak-hang-in-tx: a negative control that must fail transactions/deadline alone.

A good minimal package declaring one recurrence, with one defect:
recurrence.next, which the host calls inside its own transaction and which
must answer within 250 ms, is never answered. Every other request is
served as usual.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("recurrence.next")
def recurrence_next(params):
    # THE DEFECT: no answer at all. A good package would answer
    # {"next": <now + 1 day>} at once.
    pyproto.log("recurrence.next for %r: not answering" % params.get("recurrence"))
    return pyproto.NO_ANSWER


if __name__ == "__main__":
    ext.run()
