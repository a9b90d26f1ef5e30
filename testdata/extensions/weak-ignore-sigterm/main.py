#!/usr/bin/env python3
"""weak-ignore-sigterm: a negative control that must fail lifecycle/sigterm alone.

A good minimal package with one defect: it ignores SIGTERM, so once
shutdown's grace has passed the host has only SIGKILL left. It still
exits on shutdown and at the end of its stdin.
"""

import signal
import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)

# THE DEFECT: SIGTERM is ignored.
signal.signal(signal.SIGTERM, signal.SIG_IGN)

if __name__ == "__main__":
    ext.run()
