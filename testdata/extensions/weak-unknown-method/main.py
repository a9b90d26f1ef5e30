#!/usr/bin/env python3
"""weak-unknown-method: a negative control that must fail wire/method-not-found alone.

A good minimal package with one defect: a method it does not serve is
refused as an authored error (-32000, unsupported) instead of the
JSON-RPC method-not-found code -32601.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)

known = ext.dispatch


def dispatch(method, params):
    try:
        return known(method, params)
    except LookupError:
        # THE DEFECT: an unknown method is answered as an authored refusal.
        raise pyproto.Refusal("unsupported", "%s is not supported" % method)


ext.dispatch = dispatch

if __name__ == "__main__":
    ext.run()
