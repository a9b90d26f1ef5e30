#!/usr/bin/env python3
"""weak-lenient-reader: a negative control that must fail wire/malformed-closes alone.

A good minimal package with one defect: its reader answers a line that is
not JSON with a parse error and reads on, and reads a line of any length,
instead of treating both as the protocol error that closes the
connection.
"""

import json
import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


def lenient_read():
    while True:
        line = ext.stdin.readline()  # THE DEFECT: no bound on a line
        if not line:
            return None
        if not line.strip():
            continue
        try:
            message = json.loads(line)
            if isinstance(message, dict):
                return message
        except (ValueError, UnicodeDecodeError):
            pass
        # THE DEFECT: a protocol error is answered and the connection kept.
        ext.send({"id": None, "error": {"code": pyproto.PARSE_ERROR, "message": "parse error", "data": {"code": "parse_error"}}})


ext.read = lenient_read

if __name__ == "__main__":
    ext.run()
