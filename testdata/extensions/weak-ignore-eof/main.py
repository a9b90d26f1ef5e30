#!/usr/bin/env python3
"""weak-ignore-eof: a negative control that must fail lifecycle/stdin-eof alone.

A good minimal package with one defect: when its stdin reaches end of file
it keeps running instead of exiting, so a crashed host would leave it
behind. It still answers shutdown and exits then.
"""

import os
import sys
import time

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


def linger():
    # THE DEFECT: stay alive after the host is gone, until a signal ends it.
    pyproto.log("stdin closed; staying up anyway")
    while True:
        time.sleep(3600)


ext.on_eof = linger

if __name__ == "__main__":
    ext.run()
