#!/usr/bin/env python3
"""A package for the doctor tests: its checks answer in each shape the
spec names. view answers info with the configuration view it was given,
as compact JSON with sorted keys, in its detail; checkview {ok: true};
checkview-bare {ok: false}; odd a status no spec has; broken fail.
"""

import json
import os
import sys

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "open-conduit-extension.json")

with open(MANIFEST, encoding="utf-8") as f:
    manifest = json.load(f)
out = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)


def send(message):
    line = json.dumps(dict({"jsonrpc": "2.0"}, **message), separators=(",", ":"))
    out.write(line.encode("utf-8") + b"\n")


def check(params):
    name = params.get("check")
    if name == "view":
        view = json.dumps(params.get("config"), sort_keys=True, separators=(",", ":"))
        return {"status": "info", "code": "checkview_view", "detail": view}
    if name == "checkview":
        return {"ok": True, "detail": "fine"}
    if name == "checkview-bare":
        return {"ok": False, "detail": "not fine"}
    if name == "odd":
        return {"status": "splendid"}
    if name == "broken":
        return {"status": "fail", "code": "checkview_broken", "detail": "broken on purpose", "items": ["one", "two"]}
    raise LookupError(name)


def serve(message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {"protocol_version": 1, "manifest": manifest}
    if method in ("configure", "shutdown"):
        return {}
    if method == "check.run":
        return check(params)
    raise LookupError(method)


while True:
    line = sys.stdin.buffer.readline()
    if not line:
        sys.exit(0)
    if not line.strip():
        continue
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    try:
        send({"id": message["id"], "result": serve(message)})
    except LookupError:
        send({"id": message["id"], "error": {"code": -32601, "message": "method not found", "data": {"code": "method_not_found"}}})
