#!/usr/bin/env python3
"""A package for the offline doctor tests (config check): its checks
answer in each shape the spec names, from the configuration view they are
given. offlinecheck is ok with the view's scope IDs in its detail; odd a
status no spec has; bare {ok: false}; broken fail when an entry's config
sets "fail", else ok; online is not declared offline, so config check must
never run it. validate is not served (method_not_found accepts).
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


def entries(view):
    for scope in view.get("scopes") or []:
        for entry in scope.get("entries") or []:
            yield scope.get("id"), entry


def check(params):
    name, view = params.get("check"), params.get("config") or {}
    if name == "offlinecheck":
        scopes = sorted(s.get("id") for s in view.get("scopes") or [])
        return {"status": "ok", "detail": "scopes: " + ",".join(scopes)}
    if name == "odd":
        return {"status": "splendid"}
    if name == "bare":
        return {"ok": False, "detail": "not fine"}
    if name == "broken":
        failing = [scope + "/" + e.get("id") for scope, e in entries(view) if (e.get("config") or {}).get("fail")]
        if failing:
            return {"status": "fail", "code": "offlinecheck_broken", "detail": "told to fail", "items": failing}
        return {"ok": True, "detail": "fine"}
    if name == "online":
        return {"ok": True, "detail": "online only"}
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
