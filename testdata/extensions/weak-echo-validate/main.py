#!/usr/bin/env python3
"""weak-echo-validate: a negative control that must fail validate/answers alone.

A good minimal package with one extension type, which takes no settings,
and one defect: validate refuses a config with fields by quoting the
config back, values and all, where a refusal names the rule only.
"""

import json
import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)


@ext.handle("validate")
def validate(params):
    if params.get("type") not in ext.declared_types():
        raise pyproto.Refusal("undeclared", "that type is not one weak-echo-validate declares")
    config = params.get("config") or {}
    if config:
        # THE DEFECT: the refusal echoes the operator's config values.
        raise pyproto.Refusal("invalid", "unexpected settings: %s" % json.dumps(config))
    return {}


if __name__ == "__main__":
    ext.run()
