#!/usr/bin/env python3
"""weak-unscoped-kv: a negative control that must fail kv/scoping alone.

A good minimal package with one defect: while serving configure it reads
another extension's KV namespace ("notes"). The host refuses the read; the
package shrugs and carries on, so everything else about it is correct.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("configure")
def configure(params):
    # Its own namespace: fine.
    ext.call("kv.get", {"namespace": ext.name, "key": "cursor"})
    # THE DEFECT: a namespace that is not this extension's.
    try:
        ext.call("kv.get", {"namespace": "notes", "key": "cursor"})
    except pyproto.Refusal as r:
        pyproto.log("foreign read refused: %s (%s)" % (r.message, r.code))
    return {}


if __name__ == "__main__":
    ext.run()
