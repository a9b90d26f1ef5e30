#!/usr/bin/env python3
"""weak-kv-migration: a negative control that must fail kv/migration alone.

A good minimal package at KV layout 1 with one defect in its migration
from layout 0: it copies each legacy/<k> entry to item/<k> and adds the
number of legacy entries to the count, with every written key guarded by
a precondition, before it answers configure; but it leaves the legacy
entries in place and adds to the count again on every run. Run a second
time, as after a crash before the host recorded layout 1, it counts the
same entries twice. A good migration would move the entries (or check
what it already did), so a second run writes nothing.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
LEGACY = "legacy/"


def guard(key):
    """The precondition on key as it is now, and its value (None when absent)."""
    got = ext.call("kv.get", {"namespace": ext.name, "key": key}) or {}
    if got.get("found"):
        return {"namespace": ext.name, "key": key, "version": got.get("version")}, got.get("value")
    return {"namespace": ext.name, "key": key, "absent": True}, None


def migrate():
    page = ext.call("kv.list", {"namespace": ext.name, "prefix": LEGACY}) or {}
    items = page.get("items") or []
    preconditions, puts = [], []
    for item in items:
        key = "item/" + item["key"][len(LEGACY):]
        pre, _ = guard(key)
        preconditions.append(pre)
        puts.append({"namespace": ext.name, "key": key, "value": item["value"]})
    pre, count = guard("count")
    preconditions.append(pre)
    # THE DEFECT: the legacy entries stay and are counted again each run.
    total = (count or {}).get("items", 0) + len(items)
    puts.append({"namespace": ext.name, "key": "count", "value": {"items": total}})
    ext.call("kv.commit", {"preconditions": preconditions, "puts": puts})


@ext.handle("configure")
def configure(params):
    kv = params.get("kv") or {}
    if kv.get("stored", 0) < kv.get("declared", 0):
        migrate()
    return {}


if __name__ == "__main__":
    ext.run()
