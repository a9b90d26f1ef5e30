#!/usr/bin/env python3
"""A package for the telemetry tests: at each configure it captures an
event for the machine and one for each scope the previous configure gave
it entries in (the scopes the host has it configured for while the new
configure runs), noting how each capture was answered in
<state>/captures.jsonl; every batch telemetry.sink brings is appended to
<state>/sink.jsonl. Without the permissions (telemetry-mute) its captures
are refused, and it notes that.
"""

import json
import os
import sys

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "open-conduit-extension.json")

with open(MANIFEST, encoding="utf-8") as f:
    manifest = json.load(f)
name = manifest["name"]
out = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
state_dir = None
next_id = 0
queued = []
configured = []  # the scopes of the last configure


def send(message):
    line = json.dumps(dict({"jsonrpc": "2.0"}, **message), separators=(",", ":"))
    out.write(line.encode("utf-8") + b"\n")


def read():
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        if line.strip():
            return json.loads(line)


def call(method, params):
    """Calls the host; returns ("ok", result) or (code, message)."""
    global next_id
    next_id += 1
    send({"id": next_id, "method": method, "params": params})
    while True:
        message = read()
        if message is None:
            sys.exit(0)
        if "method" in message:
            queued.append(message)
            continue
        if message.get("id") != next_id:
            continue
        if "error" in message:
            err = message["error"] or {}
            return (err.get("data") or {}).get("code", "internal"), err.get("message", "")
        return "ok", message.get("result")


def note(file, record):
    with open(os.path.join(state_dir, file), "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def configure(params):
    global configured
    for scope in [""] + configured:
        capture = {"name": name + ".configured", "properties": {"entries": len(params.get("entries") or [])}}
        if scope:
            capture["scope_id"] = scope
        code, _ = call("telemetry.capture", capture)
        note("captures.jsonl", {"scope_id": scope, "answer": code})
    configured = sorted({e.get("scope_id", "") for e in params.get("entries") or []})
    return {}


def serve(message):
    global state_dir
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        state_dir = params["state_dir"]
        return {"protocol_version": 1, "manifest": manifest}
    if method == "configure":
        return configure(params)
    if method == "shutdown":
        return {}
    if method == "telemetry.sink":
        note("sink.jsonl", params)
        return {}
    raise LookupError(method)


while True:
    message = queued.pop(0) if queued else read()
    if message is None:
        sys.exit(0)
    if "id" not in message or "method" not in message:
        continue
    try:
        send({"id": message["id"], "result": serve(message)})
    except LookupError:
        send({"id": message["id"], "error": {"code": -32601, "message": "method not found", "data": {"code": "method_not_found"}}})
