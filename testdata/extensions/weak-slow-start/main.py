#!/usr/bin/env python3
"""weak-slow-start: a negative control that must fail lifecycle/start-bound alone.

A good minimal package with one defect: it keeps an index beside its
installed state (<state>/extensions/<name>), and started anywhere else,
as offline validation starts a package in a fresh temporary directory,
it rebuilds that index before it answers initialize, which takes longer
than the host's 15 s start bound. A good package answers initialize
first and does slow setup later, or not at start at all.
"""

import os
import sys
import time

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
REBUILD_SECONDS = 20

answer_initialize = ext.initialize


def initialize(params):
    state = os.path.normpath(params.get("state_dir") or "")
    installed = os.path.basename(state) == ext.name and os.path.basename(os.path.dirname(state)) == "extensions"
    if not installed:
        # THE DEFECT: slow setup before the answer, past the start bound.
        pyproto.log("%s: rebuilding the index in %s before answering initialize" % (ext.name, state))
        time.sleep(REBUILD_SECONDS)
    return answer_initialize(params)


ext.initialize = initialize

if __name__ == "__main__":
    ext.run()
