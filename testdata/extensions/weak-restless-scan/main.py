#!/usr/bin/env python3
"""weak-restless-scan: a negative control that must fail ingress/stable-scan alone.

A good minimal ingress package with one reconciled source of two items and
one defect: each scan mints a new version for every item, though nothing
changed, so the host would accept every item again on every scan.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the package directories clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproto"))
import pyproto  # noqa: E402

ext = pyproto.Extension(__file__)
NAME = "weak-restless-scan"
ITEMS = ["item-a", "item-b"]
scans = 0


@ext.handle("configure")
def configure(params):
    sources = []
    for e in ext.entries:
        if e.get("type") == NAME:
            sources.append({"name": "%s/%s" % (NAME, e.get("id")), "scope_id": e.get("scope_id"),
                            "families": [NAME + ".item"], "reconcile": True})
    return {"sources": sources}


@ext.handle("ingress.push")
def ingress_push(params):
    return {"events": []}  # deliveries carry nothing this source reads


@ext.handle("ingress.reconcile")
def ingress_reconcile(params):
    global scans
    cursor = params.get("cursor") or ""
    if cursor == "":
        scans += 1
    rest = [i for i in ITEMS if i > cursor]
    item = rest[0]
    # THE DEFECT: the version counts scans, not changes.
    version = "scan-%d" % scans
    page = {"observations": [{"item": item, "version": version, "event": {
        "source": params.get("source"), "delivery_id": "%s@%s" % (item, version), "family": NAME + ".item",
        "payload": {"id": item}}}]}
    if len(rest) > 1:
        page["next"] = item
    else:
        page["complete"] = True
    return page


if __name__ == "__main__":
    ext.run()
