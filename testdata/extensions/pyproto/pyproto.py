"""pyproto: a tiny JSON-RPC-over-stdio helper for Python test packages.

It is not a package (there is no manifest here): the weakened negative
controls next to it import it through sys.path, so each of them stays a
good minimal package plus one deliberate defect.

What it does for a package:
  - reads one JSON message per line from stdin and writes one per line to
    the protocol's stdout, flushed; sys.stdout and file descriptor 1 point
    at stderr, so a stray print cannot reach the protocol by accident
    (write_raw_stdout is there for the package that must do it on purpose);
  - initialize with version negotiation (refused with
    unsupported_protocol_version when no version is shared, and nothing
    else is valid before it succeeds), configure, shutdown (answer, then
    exit), exit at end of stdin, and a default validate that accepts any
    object of a declared type;
  - a line that is not JSON or is longer than MAX_MESSAGE_BYTES is a
    protocol error: it is answered -32700 and the process exits;
  - dispatches requests by method to handlers; an unknown method is
    -32601, a Refusal is an authored error (-32000 with data.code), bad
    params are -32602, anything else -32603 internal with the traceback on
    stderr;
  - Extension.call lets a handler call the host (kv.get, kv.commit) and
    wait for the answer while still reading: requests that arrive
    meanwhile are queued and served next, a $/cancel for the request being
    served makes the call raise Cancelled (answered -32800);
  - the host's error answers raise HostRefusal (a Refusal, so a handler
    may catch it by code); one a handler lets escape is a failure the
    package did not author, answered -32603 "internal error" with its
    detail on stderr only.

Requests are served one at a time, in arrival order. The one served and
those queued behind it are the requests in flight: at MAX_INFLIGHT, a
request read while waiting for the host is answered overloaded at once.
"""

import hashlib
import json
import os
import sys
import traceback

PROTOCOL_VERSIONS = [1]
MAX_MESSAGE_BYTES = 16 << 20  # one line at most; a longer one closes the connection
MANIFEST_FILE = "open-conduit-extension.json"
MAX_INFLIGHT = 64  # requests in flight at once; over it, overloaded

PARSE_ERROR = -32700
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL = -32603
AUTHORED = -32000
CANCELLED = -32800

# A handler returns NO_ANSWER to leave its request unanswered.
NO_ANSWER = object()


class Refusal(Exception):
    """An authored error: it crosses as -32000 with its code in data.code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class HostRefusal(Refusal):
    """An error the host answered a call with. Not authored here: if a
    handler lets it escape, it crosses as internal without its text."""


class Cancelled(Exception):
    """The request being served was cancelled with $/cancel."""


class HostGone(Exception):
    """Stdin reached end of file while a call waited for the host."""


def emitted_event_id(source, delivery_id):
    """The id an Event emitted from (source, delivery_id) gets."""
    h = hashlib.sha256()
    for part in (source.encode("utf-8"), delivery_id.encode("utf-8")):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return "evt_" + h.hexdigest()



def record_once(ext, params):
    """The good handler the controls share: an operation.call that records
    its input under its request ID once, answers a retry with what it
    recorded, and answers a lost race (conflict) with the winner's record."""
    data = params.get("input") or {}
    title = data.get("title", "") if isinstance(data, dict) else ""
    key = "request/" + (params.get("request_id") or "")
    found = ext.call("kv.get", {"namespace": ext.name, "key": key})
    if found.get("found"):
        return {"output": found.get("value")}
    output = {"item": key, "title": title}
    try:
        ext.call(
            "kv.commit",
            {
                "preconditions": [{"namespace": ext.name, "key": key, "absent": True}],
                "puts": [{"namespace": ext.name, "key": key, "value": output}],
            },
        )
    except Refusal as refusal:
        if refusal.code != "conflict":
            raise
        # Another attempt recorded it first: answer what it recorded.
        found = ext.call("kv.get", {"namespace": ext.name, "key": key})
        return {"output": found.get("value")}
    return {"output": output}

def log(*args):
    print(*args, file=sys.stderr, flush=True)


class Extension:
    """One package: its manifest, its handlers and its connection."""

    def __init__(self, script):
        self.dir = os.path.dirname(os.path.abspath(script))
        with open(os.path.join(self.dir, MANIFEST_FILE), encoding="utf-8") as f:
            self.manifest = json.load(f)
        self.name = self.manifest["name"]
        self.handlers = {}
        self.initialized = False
        self.shutting_down = False
        self.entries = []
        self.queued = []
        self.next_id = 0
        self.serving = None  # id of the request being served
        self.cancelled = set()
        # Whether a $/cancel stops the request it names; only a negative
        # control turns it off.
        self.honour_cancel = True
        # How many requests may be in flight; only a negative control
        # lifts it (None: queue without bound, never overloaded).
        self.max_inflight = MAX_INFLIGHT
        # What to do at end of stdin; the default exits.
        self.on_eof = lambda: sys.exit(0)
        # Keep the real stdout for the protocol; everything else goes to stderr.
        self.out = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self.stdin = sys.stdin.buffer

    def handle(self, method):
        """Decorator: registers fn(params) as the handler of method."""

        def register(fn):
            self.handlers[method] = fn
            return fn

        return register

    # ---- wire ----

    def send(self, message):
        line = json.dumps(dict({"jsonrpc": "2.0"}, **message), separators=(",", ":"), ensure_ascii=False)
        self.out.write(line.encode("utf-8") + b"\n")

    def write_raw_stdout(self, text):
        """Writes text as a line on the protocol's stdout: a stray line."""
        self.out.write(text.encode("utf-8") + b"\n")

    def read(self):
        """The next message, or None at end of input."""
        while True:
            line = self.stdin.readline(MAX_MESSAGE_BYTES + 2)
            if not line:
                return None
            too_long = len(line.rstrip(b"\r\n")) > MAX_MESSAGE_BYTES
            line = line.strip()
            if not line:
                continue
            try:
                if too_long:
                    raise ValueError("a line longer than %d bytes" % MAX_MESSAGE_BYTES)
                message = json.loads(line)
                if not isinstance(message, dict):
                    raise ValueError("not a JSON object")
                return message
            except (ValueError, UnicodeDecodeError) as err:
                self.send({"id": None, "error": {"code": PARSE_ERROR, "message": "parse error", "data": {"code": "parse_error"}}})
                log("%s: unreadable message: %s" % (self.name, err))
                sys.exit(1)

    def note_cancel(self, message):
        target = (message.get("params") or {}).get("id")
        if target is not None:
            self.cancelled.add(target)

    def call(self, method, params):
        """Calls the host and returns its result, or raises Refusal."""
        self.next_id += 1
        my_id = self.next_id
        self.send({"id": my_id, "method": method, "params": params})
        while True:
            message = self.read()
            if message is None:
                raise HostGone()
            if message.get("method") == "$/cancel" and "id" not in message:
                self.note_cancel(message)
                if self.honour_cancel and self.serving is not None and self.serving in self.cancelled:
                    raise Cancelled()
                continue
            if "method" in message:
                if "id" in message and self.max_inflight is not None and 1 + len(self.queued) >= self.max_inflight:
                    # The one served and those queued fill the bound:
                    # refuse at once rather than stop reading.
                    self.send({"id": message["id"], "error": {"code": AUTHORED, "message": "overloaded: %d requests in flight" % self.max_inflight, "data": {"code": "overloaded"}}})
                    continue
                self.queued.append(message)
                continue
            if message.get("id") != my_id:
                continue  # an answer to nothing we wait for
            if "error" in message:
                err = message["error"] or {}
                code = (err.get("data") or {}).get("code", "internal")
                raise HostRefusal(code, err.get("message", code))
            return message.get("result")

    # ---- lifecycle ----

    def initialize(self, params):
        theirs = params.get("protocol_versions") or []
        common = [v for v in PROTOCOL_VERSIONS if v in theirs]
        if not common:
            raise Refusal(
                "unsupported_protocol_version",
                "no common protocol version (ours %s, theirs %s)" % (PROTOCOL_VERSIONS, theirs),
            )
        self.initialized = True
        return {"protocol_version": max(common), "manifest": self.manifest}

    def configure(self, params):
        kv = params.get("kv") or {}
        if kv.get("stored", 0) > kv.get("declared", 0):
            raise Refusal("kv_downgrade", "the stored KV layout is newer than this release's")
        self.entries = list(params.get("entries") or [])
        hook = self.handlers.get("configure")
        if hook is not None:
            return hook(params)
        return {}

    def declared_types(self):
        """The types validate answers for: extension and connection types,
        route handlers and executors."""
        p = self.manifest.get("provides") or {}
        names = [x.get("type") for x in p.get("extensions") or []]
        names += [x.get("type") for x in p.get("connections") or []]
        names += [x.get("handler") for x in p.get("routes") or []]
        names += [x.get("name") for x in p.get("executors") or []]
        return names

    def validate(self, params):
        """The default validate: any object of a declared type is valid (a
        test package has no settings to check); another type is undeclared."""
        if params.get("type") not in self.declared_types():
            raise Refusal("undeclared", "that type is not one %s declares" % self.name)
        return {}

    def dispatch(self, method, params):
        if method == "initialize":
            if self.initialized:
                raise Refusal("invalid", "initialize already succeeded")
            return self.initialize(params)
        if not self.initialized:
            raise Refusal("invalid", "%s before initialize: no other method is valid until initialize succeeds" % method)
        if self.shutting_down:
            raise Refusal("shutting_down", "shutting down: %s refused" % method)
        if method == "configure":
            return self.configure(params)
        if method == "shutdown":
            self.shutting_down = True
            return {}
        if method == "validate" and method not in self.handlers:
            return self.validate(params)
        handler = self.handlers.get(method)
        if handler is None:
            raise LookupError(method)
        return handler(params)

    def serve(self, message):
        method = message.get("method")
        msg_id = message["id"]
        params = message.get("params")
        if params is None:
            params = {}
        if self.honour_cancel and msg_id in self.cancelled:
            self.cancelled.discard(msg_id)
            self.send({"id": msg_id, "error": {"code": CANCELLED, "message": "cancelled", "data": {"code": "cancelled"}}})
            return
        self.serving = msg_id
        try:
            if not isinstance(params, dict):
                raise TypeError("params must be an object")
            result = self.dispatch(method, params)
            if result is not NO_ANSWER:
                self.send({"id": msg_id, "result": result if result is not None else {}})
        except LookupError:
            self.send({"id": msg_id, "error": {"code": METHOD_NOT_FOUND, "message": "method %r is not one this extension serves" % method, "data": {"code": "method_not_found"}}})
        except HostRefusal as r:
            log("%s: %s: the host answered %s: %s" % (self.name, method, r.code, r.message))
            self.send({"id": msg_id, "error": {"code": INTERNAL, "message": "internal error", "data": {"code": "internal"}}})
        except Refusal as r:
            self.send({"id": msg_id, "error": {"code": AUTHORED, "message": r.message, "data": {"code": r.code}}})
        except Cancelled:
            self.send({"id": msg_id, "error": {"code": CANCELLED, "message": "cancelled", "data": {"code": "cancelled"}}})
        except (TypeError, AttributeError, ValueError) as err:
            self.send({"id": msg_id, "error": {"code": INVALID_PARAMS, "message": "invalid params: %s" % err, "data": {"code": "invalid_params"}}})
        except HostGone:
            self.on_eof()
        except Exception:
            log(traceback.format_exc())
            self.send({"id": msg_id, "error": {"code": INTERNAL, "message": "internal error", "data": {"code": "internal"}}})
        finally:
            self.serving = None
            self.cancelled.discard(msg_id)

    def run(self):
        """Serves until shutdown or end of input."""
        while True:
            message = self.queued.pop(0) if self.queued else self.read()
            if message is None:
                self.on_eof()
                return
            if "id" not in message:
                if message.get("method") == "$/cancel":
                    self.note_cancel(message)
                continue  # other notifications, and stray answers
            if "method" not in message:
                continue  # an answer to a call nobody waits for
            self.serve(message)
            if self.shutting_down:
                # Requests that arrived meanwhile are refused before exiting.
                for queued in self.queued:
                    if "id" in queued and "method" in queued:
                        self.send({"id": queued["id"], "error": {"code": AUTHORED, "message": "shutting down", "data": {"code": "shutting_down"}}})
                sys.exit(0)
