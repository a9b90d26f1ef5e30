#!/usr/bin/env python3
"""pynotes: an Open Conduit extension in Python, standard library only.

It proves the protocol is language-neutral: JSON-RPC 2.0, one JSON object
per line on stdin and stdout, with requests going both ways. It serves
the lifecycle (initialize with version negotiation, configure, shutdown),
a route handler (route.match) and a handler operation (operation.call)
that records its effect in the host's KV once per request ID, and stops
a request the host cancels ($/cancel) while it waits for the host.
certify/inputs.json gives certification a note to route.

Standard output belongs to the protocol. Before anything else the script
keeps a private copy of it and points file descriptor 1 (and sys.stdout)
at standard error, so a stray print, or a child process writing to its
stdout, cannot corrupt the stream.
"""

import json
import os
import sys

NAME = "pynotes"
PROTOCOL_VERSIONS = [1]
MAX_MESSAGE_BYTES = 16 << 20  # one line at most; a longer one closes the connection
NOTE_SCHEMA = "pynotes.note.v1"
NAMESPACE = "pynotes"

# JSON-RPC error numbers.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
AUTHORED = -32000

# Limits of a Work display (bytes).
MAX_TITLE = 200
MAX_REF = 40


class Refusal(Exception):
    """An authored error: crosses as -32000 with its code in data.code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class Unknown(Exception):
    """A method this extension does not serve: -32601."""


class Cancelled(Exception):
    """The request being served was cancelled with $/cancel: -32800."""


class Transport:
    """Reads messages from stdin and writes them to the protocol's stdout.

    Requests the extension makes to the host (kv.get, kv.commit) wait for
    their response; host requests that arrive meanwhile are queued and
    served afterwards, so the reader never loses a message.
    """

    def __init__(self, infile, outfile):
        self.infile = infile
        self.outfile = outfile
        self.next_id = 0
        self.queued = []
        self.serving = None  # id of the host request being served

    def send(self, message):
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        self.outfile.write(line.encode("utf-8") + b"\n")
        self.outfile.flush()

    def read(self):
        """The next message, or None at end of input. A line longer than
        MAX_MESSAGE_BYTES is a protocol error, as invalid JSON is."""
        while True:
            line = self.infile.readline(MAX_MESSAGE_BYTES + 2)
            if not line:
                return None
            if len(line.rstrip(b"\r\n")) > MAX_MESSAGE_BYTES:
                raise ValueError("a line longer than %d bytes" % MAX_MESSAGE_BYTES)
            line = line.strip()
            if line:
                return json.loads(line)

    def next_request(self):
        if self.queued:
            return self.queued.pop(0)
        return self.read()

    def call(self, method, params):
        """Calls the host and returns its result, or raises its error."""
        self.next_id += 1
        my_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            message = self.read()
            if message is None:
                raise EOFError("the host closed the connection")
            if message.get("method") == "$/cancel" and "id" not in message:
                # The host stopped waiting for the request being served:
                # stop waiting for the host too, and answer cancelled.
                if (message.get("params") or {}).get("id") == self.serving:
                    raise Cancelled()
                continue
            if "method" in message:
                self.queued.append(message)
                continue
            if message.get("id") != my_id:
                continue  # not ours: an answer to nothing we wait for
            if "error" in message:
                err = message["error"]
                code = (err.get("data") or {}).get("code", "internal")
                raise Refusal(code, err.get("message", code))
            return message.get("result")


def clip(text, limit):
    """The first line of text without control characters, within limit bytes."""
    line = (text or "").split("\n", 1)[0]
    line = "".join(ch for ch in line if ch.isprintable()).strip()
    data = line.encode("utf-8")[:limit]
    return data.decode("utf-8", "ignore")


class Extension:
    def __init__(self, transport, manifest):
        self.transport = transport
        self.manifest = manifest
        self.initialized = False
        self.entries = []

    def serve(self, method, params):
        if method == "initialize":
            if self.initialized:
                raise Refusal("invalid", "initialize already succeeded")
            return self.initialize(params)
        if not self.initialized:
            raise Refusal("invalid", method + " before initialize: no other method is valid until initialize succeeds")
        handler = {
            "configure": self.configure,
            "route.match": self.route_match,
            "operation.call": self.operation_call,
            "validate": self.validate,
            "shutdown": lambda params: {},
        }.get(method)
        if handler is None:
            raise Unknown(method)
        return handler(params)

    def initialize(self, params):
        theirs = params.get("protocol_versions") or []
        common = [v for v in PROTOCOL_VERSIONS if v in theirs]
        if not common:
            raise Refusal(
                "unsupported_protocol_version",
                "no common protocol version: the host speaks %s, this extension %s" % (theirs, PROTOCOL_VERSIONS),
            )
        self.initialized = True
        return {"protocol_version": max(common), "manifest": self.manifest}

    def configure(self, params):
        kv = params.get("kv") or {}
        if kv.get("stored", 0) > kv.get("declared", 0):
            raise Refusal("kv_downgrade", "the stored KV layout is newer than this release's")
        self.entries = [e for e in params.get("entries") or [] if e.get("type") == NAME]
        return {}

    def validate(self, params):
        """An entry or a route of pynotes takes no settings: its config is
        an empty object. A refusal names the rule, never a value."""
        kind, typ = params.get("kind"), params.get("type")
        if kind not in ("extension", "route") or typ != NAME:
            raise Refusal("undeclared", "%s %r is not a type pynotes declares" % (clip(str(kind), 40), clip(str(typ), 60)))
        config = params.get("config")
        if config is None:
            config = {}
        if not isinstance(config, dict):
            raise Refusal("invalid", "the config of a pynotes %s must be a JSON object" % kind)
        if config:
            raise Refusal("invalid", "a pynotes %s takes no settings: %d unknown field(s)" % (kind, len(config)))
        return {"describe": ["notes of scope %s" % clip(str(params.get("scope_id")), 60)]}

    def route_match(self, params):
        if params.get("handler") != NAME:
            raise Refusal("undeclared", "route handler %r is not declared" % params.get("handler"))
        event = params.get("event") or {}
        if event.get("family") != "pynotes.note":
            return {"match": False, "reason": "not a note"}
        if event.get("schema") != NOTE_SCHEMA:
            return {"match": False, "reason": "payload schema %r is not readable by this release" % event.get("schema")}
        payload = event.get("payload") or {}
        note_id = str(payload.get("id", ""))
        display = {"title": clip(payload.get("title", ""), MAX_TITLE), "ref": clip(note_id, MAX_REF)}
        if not display["title"] and not display["ref"]:
            display = None
        result = {
            "match": True,
            "kind": "pynotes-review",
            "correlation_keys": ["pynotes:" + note_id],
            "reason": "note " + note_id,
        }
        if display:
            result["display"] = display
        return result

    def operation_call(self, params):
        if params.get("operation") != "pynotes.add":
            raise Refusal("undeclared", "operation %r is not declared" % params.get("operation"))
        data = params.get("input") or {}
        title = data.get("title") if isinstance(data, dict) else None
        if not isinstance(title, str) or not title.strip():
            raise Refusal("invalid", "input: a note needs a title")
        request_id = params.get("request_id") or ""
        output = {"note": clip(title, MAX_TITLE)}
        if not request_id:
            return {"output": output}  # nothing to replay a call without an ID against
        key = "request/" + request_id
        # Idempotent on the request ID: the first call records its output,
        # a retry finds it and answers the same without recording again.
        found = self.transport.call("kv.get", {"namespace": NAMESPACE, "key": key})
        if found.get("found"):
            return {"output": found.get("value")}
        try:
            self.transport.call(
                "kv.commit",
                {
                    "preconditions": [{"namespace": NAMESPACE, "key": key, "absent": True}],
                    "puts": [{"namespace": NAMESPACE, "key": key, "value": output}],
                },
            )
        except Refusal as refusal:
            if refusal.code != "conflict":
                raise
            # Another attempt recorded it first: answer what it recorded.
            found = self.transport.call("kv.get", {"namespace": NAMESPACE, "key": key})
            return {"output": found.get("value")}
        return {"output": output}


def main():
    # Keep the real stdout for the protocol; everything else writes to stderr.
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "open-conduit-extension.json"), encoding="utf-8") as f:
        manifest = json.load(f)

    transport = Transport(sys.stdin.buffer, protocol_out)
    extension = Extension(transport, manifest)
    while True:
        try:
            message = transport.next_request()
        except (ValueError, UnicodeDecodeError) as err:
            transport.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            print("pynotes: unreadable message: %s" % err, file=sys.stderr)
            return 1
        if message is None:
            return 0  # end of input: the host is gone
        method = message.get("method")
        if "id" not in message:
            continue  # a notification: a $/cancel of a request already answered has nothing to stop
        msg_id = message["id"]
        transport.serving = msg_id
        params = message.get("params")
        if params is None:
            params = {}
        try:
            if not isinstance(params, dict):
                raise TypeError("params must be an object")
            result = extension.serve(method, params)
            transport.send({"jsonrpc": "2.0", "id": msg_id, "result": result})
        except Unknown:
            transport.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": METHOD_NOT_FOUND, "message": "method %r not found" % method}})
        except Refusal as refusal:
            transport.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": AUTHORED, "message": refusal.message, "data": {"code": refusal.code}}})
        except (TypeError, AttributeError) as err:
            transport.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": INVALID_PARAMS, "message": "invalid params: %s" % err}})
        except Cancelled:
            transport.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32800, "message": "cancelled", "data": {"code": "cancelled"}}})
        except EOFError:
            return 0
        transport.serving = None
        if method == "shutdown" and extension.initialized:
            return 0  # answered: shutdown before initialize was refused, and serving goes on


if __name__ == "__main__":
    sys.exit(main())
