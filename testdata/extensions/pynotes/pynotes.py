#!/usr/bin/env python3
"""pynotes: an Open Conduit extension in Python, standard library only.

It proves the protocol is language-neutral: JSON-RPC 2.0, one JSON object
per line on stdin and stdout, with requests going both ways. It serves
the lifecycle (initialize with version negotiation, configure, shutdown),
a route handler (route.match) and a handler operation (operation.call)
that records its effect in the host's KV once per request ID, and stops
a request the host cancels ($/cancel) while it waits for the host.
certify/inputs.json gives certification a note to route.

Requests are served concurrently, each on a thread of its own, with at
most MAX_INFLIGHT (64) in flight: over it the reader answers overloaded
at once and goes on reading, since the answers that in-flight handlers'
host calls wait for arrive on the same stream. A failure pynotes did not
author (an error the host answered and a handler let escape, a bug)
crosses as -32603 "internal error"; its detail goes to stderr only.

Standard output belongs to the protocol. Before anything else the script
keeps a private copy of it and points file descriptor 1 (and sys.stdout)
at standard error, so a stray print, or a child process writing to its
stdout, cannot corrupt the stream.
"""

import json
import os
import sys
import threading
import traceback

NAME = "pynotes"
PROTOCOL_VERSIONS = [1]
MAX_MESSAGE_BYTES = 16 << 20  # one line at most; a longer one closes the connection
MAX_INFLIGHT = 64  # requests served at once; over it, overloaded
SHUTDOWN_GRACE = 3.0  # seconds shutdown waits for cancelled handlers to end
NOTE_SCHEMA = "pynotes.note.v1"
NAMESPACE = "pynotes"

# JSON-RPC error numbers.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL = -32603
AUTHORED = -32000
CANCELLED = -32800

# Limits of a Work display (bytes).
MAX_TITLE = 200
MAX_REF = 40


def log(text):
    print("pynotes: " + text, file=sys.stderr, flush=True)


class Refusal(Exception):
    """An authored error: crosses as -32000 with its code in data.code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class HostError(Refusal):
    """An error the host answered a call with. A handler may catch it by
    code; one that escapes was not authored here and crosses as internal."""


class Unknown(Exception):
    """A method this extension does not serve: -32601."""


class Cancelled(Exception):
    """The request being served was cancelled with $/cancel: -32800."""


class HostGone(Exception):
    """Stdin reached end of file while a handler waited for the host."""


class Request:
    """One host request in flight: its id and whether it was cancelled."""

    def __init__(self, msg_id):
        self.id = msg_id
        self.cancelled = threading.Event()
        self.waiting = None  # the host call it waits on, if any


class Pending:
    """A call to the host waiting for its answer."""

    def __init__(self):
        self.done = threading.Event()
        self.message = None


class Transport:
    """The stream: one reader (the main thread) and writers on any thread.

    The reader never waits for a handler. It hands each answer of the host
    to the call waiting for it, each $/cancel to the request it names, and
    each new request to a thread of its own, or refuses it overloaded.
    """

    def __init__(self, infile, outfile):
        self.infile = infile
        self.outfile = outfile
        self.lock = threading.Lock()  # guards the fields below and writes
        self.next_id = 0
        self.pending = {}  # our call id -> Pending
        self.inflight = {}  # host request id (as JSON) -> Request
        self.idle = threading.Condition(self.lock)
        self.gone = False

    def send(self, message):
        line = json.dumps(dict({"jsonrpc": "2.0"}, **message), separators=(",", ":"), ensure_ascii=False)
        with self.lock:
            self.outfile.write(line.encode("utf-8") + b"\n")
            self.outfile.flush()

    def answer_error(self, msg_id, code, message, data_code=None):
        self.send(error_answer(msg_id, code, message, data_code))

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
                message = json.loads(line)
                if not isinstance(message, dict):
                    raise ValueError("not a JSON object")
                return message

    def call(self, request, method, params):
        """Calls the host for request and returns the result, or raises
        HostError with the host's error, or Cancelled once request is."""
        pending = Pending()
        with self.lock:
            if self.gone:
                raise HostGone()
            self.next_id += 1
            my_id = self.next_id
            self.pending[my_id] = pending
        request.waiting = pending
        try:
            # Set after waiting: a $/cancel read from now on wakes the call.
            if request.cancelled.is_set():
                raise Cancelled()
            self.send({"id": my_id, "method": method, "params": params})
            pending.done.wait()
        finally:
            request.waiting = None
            with self.lock:
                self.pending.pop(my_id, None)
        if pending.message is None:
            if request.cancelled.is_set():
                # Stop waiting for the host too: cancel our own call.
                self.send({"method": "$/cancel", "params": {"id": my_id}})
                raise Cancelled()
            raise HostGone()
        if "error" in pending.message:
            err = pending.message["error"] or {}
            code = (err.get("data") or {}).get("code", "internal")
            raise HostError(code, err.get("message", code))
        return pending.message.get("result")

    def deliver(self, message):
        """Hands the host's answer to the call waiting for it."""
        with self.lock:
            pending = self.pending.get(message.get("id"))
        if pending is not None:
            pending.message = message
            pending.done.set()

    def cancel(self, target):
        """Marks the request target cancelled and wakes its host call."""
        with self.lock:
            request = self.inflight.get(json.dumps(target))
        if request is not None:
            request.cancelled.set()
            waiting = request.waiting
            if waiting is not None:
                waiting.done.set()

    def begin(self, msg_id):
        """A Request for msg_id, or None when MAX_INFLIGHT are in flight."""
        with self.lock:
            if len(self.inflight) >= MAX_INFLIGHT:
                return None
            request = Request(msg_id)
            self.inflight[json.dumps(msg_id)] = request
            return request

    def end(self, request):
        with self.lock:
            self.inflight.pop(json.dumps(request.id), None)
            if not self.inflight:
                self.idle.notify_all()

    def hang_up(self):
        """End of input: every waiting call ends with HostGone."""
        with self.lock:
            self.gone = True
            waiting = list(self.pending.values())
        for pending in waiting:
            pending.done.set()

    def drain(self, timeout):
        """Cancels every request in flight and waits for them to end."""
        with self.lock:
            requests = list(self.inflight.values())
        for request in requests:
            self.cancel(request.id)
        with self.lock:
            self.idle.wait_for(lambda: not self.inflight, timeout)


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

    def serve(self, request, method, params):
        if method == "initialize":
            if self.initialized:
                raise Refusal("invalid", "initialize already succeeded")
            return self.initialize(params)
        if not self.initialized:
            raise Refusal("invalid", method + " before initialize: no other method is valid until initialize succeeds")
        handler = {
            "configure": self.configure,
            "route.match": self.route_match,
            "operation.call": lambda params: self.operation_call(request, params),
            "validate": self.validate,
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

    def operation_call(self, request, params):
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
        found = self.transport.call(request, "kv.get", {"namespace": NAMESPACE, "key": key})
        if found.get("found"):
            return {"output": found.get("value")}
        try:
            self.transport.call(
                request,
                "kv.commit",
                {
                    "preconditions": [{"namespace": NAMESPACE, "key": key, "absent": True}],
                    "puts": [{"namespace": NAMESPACE, "key": key, "value": output}],
                },
            )
        except HostError as refusal:
            if refusal.code != "conflict":
                raise
            # Another attempt recorded it first: answer what it recorded.
            found = self.transport.call(request, "kv.get", {"namespace": NAMESPACE, "key": key})
            return {"output": found.get("value")}
        return {"output": output}


def serve_one(transport, extension, request, method, params):
    """Serves one host request and answers it (on its own thread)."""
    msg_id = request.id
    answer = None
    try:
        if not isinstance(params, dict):
            raise TypeError("params must be an object")
        answer = {"id": msg_id, "result": extension.serve(request, method, params)}
    except Unknown:
        answer = error_answer(msg_id, METHOD_NOT_FOUND, "method %r not found" % method)
    except Cancelled:
        answer = error_answer(msg_id, CANCELLED, "cancelled", "cancelled")
    except HostGone:
        pass  # the host is gone: nobody to answer
    except HostError as err:
        # The host's failure, which no handler decided about: not ours to
        # describe. Its text stays here.
        log("%s: the host answered %s: %s" % (method, err.code, err.message))
        answer = error_answer(msg_id, INTERNAL, "internal error")
    except Refusal as refusal:
        answer = error_answer(msg_id, AUTHORED, refusal.message, refusal.code)
    except (TypeError, AttributeError) as err:
        answer = error_answer(msg_id, INVALID_PARAMS, "invalid params: %s" % err)
    except Exception:
        log("%s: %s" % (method, traceback.format_exc()))
        answer = error_answer(msg_id, INTERNAL, "internal error")
    # Out of flight before the answer is written, so a request the host
    # sends once it has the answer finds the slot free.
    transport.end(request)
    if answer is not None:
        transport.send(answer)


def error_answer(msg_id, code, message, data_code=None):
    err = {"code": code, "message": message}
    if data_code:
        err["data"] = {"code": data_code}
    return {"id": msg_id, "error": err}


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
    shutting_down = False
    while True:
        try:
            message = transport.read()
        except (ValueError, UnicodeDecodeError) as err:
            transport.send({"id": None, "error": {"code": -32700, "message": "parse error"}})
            log("unreadable message: %s" % err)
            return 1
        if message is None:
            transport.hang_up()
            return 0  # end of input: the host is gone
        method = message.get("method")
        if method is None:
            transport.deliver(message)  # an answer to one of our calls
            continue
        if "id" not in message:
            if method == "$/cancel":
                transport.cancel((message.get("params") or {}).get("id"))
            continue  # other notifications carry nothing to serve
        msg_id = message["id"]
        params = message.get("params")
        if params is None:
            params = {}
        if shutting_down:
            transport.answer_error(msg_id, AUTHORED, "shutting down: %s refused" % method, "shutting_down")
            continue
        if method in ("initialize", "shutdown"):
            # Served by the reader itself, so a request read after either
            # sees its effect.
            request = transport.begin(msg_id)
            if request is None:
                transport.answer_error(msg_id, AUTHORED, "overloaded: %d requests in flight" % MAX_INFLIGHT, "overloaded")
                continue
            if method == "shutdown" and extension.initialized:
                shutting_down = True
                transport.end(request)
                # Finish or cancel what is in flight, then answer and exit.
                transport.drain(SHUTDOWN_GRACE)
                transport.send({"id": msg_id, "result": {}})
                return 0
            serve_one(transport, extension, request, method, params)
            continue
        request = transport.begin(msg_id)
        if request is None:
            # At the bound: refuse at once and go on reading, so the
            # answers in-flight handlers wait for still arrive.
            transport.answer_error(msg_id, AUTHORED, "overloaded: %d requests in flight" % MAX_INFLIGHT, "overloaded")
            continue
        threading.Thread(target=serve_one, args=(transport, extension, request, method, params), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
