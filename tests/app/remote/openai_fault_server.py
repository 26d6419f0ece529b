#!/usr/bin/env python3
"""A fault-injecting OpenAI-compatible server for the remote engine's tests (Python 3
standard library only; `openssl` on the PATH for --tls).

Binds 127.0.0.1 on a free port and prints the port on the first line of stdout, like the
download tests' server (tests/app/library/http_test_server.py), whose C++ launcher starts
this one too. Every route sits under a scenario, so that a test's base URL picks the fault:

  /<scenario>/v1/models             {"data": [{"id": "test-model"}, {"id": "other-model"}]}
  /<scenario>/v1/chat/completions   POST; the scenario decides the answer (below)
  /<scenario>/v1beta/openai/...     the same routes under Gemini's prefix (a base URL whose
                                    path ends in no version)
  /v1/...                           the same routes as /ok/v1/... (a base URL of a bare host)
  /<scenario>/last                  GET: the last chat request of that scenario:
                                    {"body": ..., "authorization": "Bearer ..." or null}
  /metrics/<name>                   the fixture <fixtures>/<name>.prom as Prometheus text
  /key-K/metrics/<name>             the same behind "Authorization: Bearer K" (else 401)
  /silent/metrics/<name>            nothing at all for 30 s

Scenarios (N, R: numbers in the name):
  ok          the answer ANSWER_PIECES streamed: a role-only first delta, an empty delta,
              comments, CRLF line ends on some events, every event written in 7-byte pieces
              (events, lines and UTF-8 characters split across reads), finish_reason "stop",
              a usage chunk, [DONE]
  crlf        as ok, every line ending in CRLF
  ping        as ok, with named events that are not the answer's between its chunks: "event:
              ping" with JSON data, "event: keepalive" with a timestamp (the standard's client
              ignores the types it does not listen for)
  nousage     as ok, without the usage chunk (llama-cpp-python's way)
  nodone      finish_reason and usage, then a clean end of the body without [DONE]
  slow        one piece every 50 ms for 20 s (for cancellation)
  cut-N       N text events, then the connection is dropped inside the chunked body
  eof-N       a close-delimited body: N text events, then a clean close (no finish, no [DONE])
  stall-N     N text events, then nothing for 30 s
  cutend      the whole answer and its finish_reason, then the connection is dropped inside
              the chunked body (no usage, no [DONE])
  stallend    the whole answer and its finish_reason, then nothing for 30 s
  headers     the 200 headers, then nothing for 30 s
  empty       the 200 headers, then an empty body (llama-cpp-python's way of failing a stream)
  silent      nothing at all for 30 s (not even headers)
  stuck       models and chat: the connection accepted, the request read, then nothing at all
              for 60 s (a hung server; the model list's own wait is what ends it)
  garbage-N   N text events, then "data: <html>...not JSON...</html>" (a long line)
  junk-N      N text events, then a line that is no SSE field at all (a proxy's HTML)
  errevent-N  N text events, then an error object in the stream, then [DONE]
  llamaerr-N  N text events, then llama.cpp's way of failing a stream that has begun: an
              "error: {...}" line (its context is too small for the prompt), then [DONE]
  ctxsize     chat: 400 with llama.cpp's body for a prompt longer than its context
  json        ignores stream=true: one chat.completion object (application/json)
  errjson     models and chat: 200 with an OpenAI error object as the body (application/json),
              its message naming the key it was given (ERROR_JSON_MESSAGE)
  key-K       needs "Authorization: Bearer K", else 401 with an OpenAI error body that
              echoes the key it was given (as some servers do)
  status-401, status-403, status-429 (Retry-After: 7), status-500 (an OpenAI error body),
  status-503 (a plain-text body), status-404 (vLLM's body for an unknown model),
  status-400 (a context-length error), status-502 (a body of text and binary: "café", an
  ANSI escape, bytes that are not UTF-8, a C1 control)
  oddids      models: ids with control characters in them (ODD_MODELS); chat as ok
  page        chat: 200 and an HTML page (a captive portal's) with no line end at its end
  moved       308 to the same route under "ok" (/ok/v1/...), for models and chat: followed,
              it would succeed
  nostreamopts  400 blaming stream_options when the request has it, else as ok
  toolcall    an answer that is only a tool call: no text, finish_reason "tool_calls", [DONE]
  tools       an answer that calls two tools, streamed as OpenAI does (TOOL_CALL_CHUNKS): a line
              of text, then the calls' pieces interleaved by index (the id and name in each
              call's first piece only, two calls' pieces in one chunk, arguments cut
              mid-string, "Zürich ✓" in them written as UTF-8), in 7-byte pieces (characters
              split across reads), finish_reason "tool_calls", usage, [DONE]
  toolbad-K   a call gone wrong, K: "noindex" (a piece without its index), "argsobject"
              (arguments sent as a JSON object, not text), "noname" (a call whose pieces never
              name its function), "rename" (a call whose name changes), "notarray"
              ('tool_calls' an object), then finish_reason "tool_calls", [DONE]
  toolcut     text and the first pieces of a call, then the connection is dropped
  tooljson    ignores stream=true: one chat.completion whose message has two tool_calls
              (TOOL_CALLS_WHOLE) and no content
  blank       an answer without text: finish_reason "stop", [DONE]
  think-F     a reasoning model's answer: THINKING_PIECES streamed in the delta's field F
              ("reasoning_content" as vLLM, SGLang, llama.cpp and DeepSeek send it, or
              "reasoning"), then ANSWER_PIECES as content, finish_reason "stop", usage, [DONE]
  thinkcut-F  the same cut by max_tokens while thinking: THINKING_PIECES only, finish_reason
              "length", usage, [DONE]
  thinkjson-F ignores stream=true: one chat.completion whose message has THINKING_PIECES in
              its field F and ANSWER_PIECES as content
  replay-NAME   the bytes of <fixtures>/NAME.sse (a recorded exchange) as the stream
  echo-WHAT     a server that quotes the key it was given (KEY below; "none" without one)
                back where the client quotes the server: WHAT is "list" (models: a 200 that is
                no OpenAI list), "completion" (chat: a JSON 200 that is no chat completion),
                "event" (chat: one text event, then an error event), "chunk" (chat: one text
                event, then a chunk whose "choices" is no array), "junk" (chat: one text
                event, then a line that is no SSE field) or "moved" (models and chat: a 308
                to a Location with the key in its query)
  /echo/metrics/body   200, a text of comments only that quotes the key (no sample)
  /echo/metrics/value  200, one sample whose value is the key (no number)

--tls DIR: serve https with a self-signed certificate for 127.0.0.1 made in DIR (cert.pem,
key.pem), for the TLS tests.
"""
import argparse
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import loopback_http  # noqa: E402  (tests/app: the servers' shared plumbing)

ANSWER_PIECES = ["Hello", ",", " wörld", "!", " Ünïcode", " ✓", " and", " more", "."]
# A reasoning model's thinking, sent apart from its text (the think-F scenarios).
THINKING_PIECES = ["The user", " greets", " me", ";", " greet", " them", " back", "."]
MODELS = ["test-model", "other-model"]
ERROR_JSON_MESSAGE = "The model is overloaded, try again later (request for key {key})"
# llama.cpp's server's error for a prompt its context cannot hold.
LLAMA_CONTEXT_ERROR = {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                       "type": "exceed_context_size_error"}
ODD_MODELS = ["test-model", "clear\x1b[2Jscreen", "two\nlines", "café"]
# status-502's body: UTF-8 text, an ANSI colour, a lone continuation byte, 0xFF and 0xFE, an
# overlong "/", a UTF-16 surrogate, a C1 control (CSI) and a character cut at the end.
BINARY_BODY = b"caf\xc3\xa9 \x1b[31mred \x80\xff\xfe \xc0\xaf \xed\xa0\x80 \xc2\x9b2J end \xe2\x9c"


# The tools scenario's chunks after its line of text: the delta's tool_calls of each, as OpenAI
# streams two calls (and as vLLM does): the id, type and name in a call's first piece, then
# the arguments in pieces cut anywhere, the two calls' pieces interleaved.
TOOL_CALL_CHUNKS = [
    [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": ""}}],
    [{"index": 0, "function": {"arguments": "{\"ci"}}],
    [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{\"zo"}}],
    [{"index": 0, "function": {"arguments": "ty\": \"Zü"}}],
    [{"index": 1, "function": {"arguments": "ne\": \"Europe/"}}, {"index": 0, "function": {"arguments": "rich ✓"}}],
    [{"index": 1, "function": {"arguments": "Paris\"}"}}],
    [{"index": 0, "function": {"arguments": "\"}"}}],
]
# What they add up to, and the tooljson scenario's whole calls.
TOOL_CALLS_WHOLE = [
    {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Zürich ✓\"}"}},
    {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\": \"Europe/Paris\"}"}},
]
# toolbad-K: the piece that goes wrong, after a good first piece of call 0.
BAD_TOOL_PIECES = {
    "noindex": [{"id": "call_x", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}],
    "argsobject": [{"index": 0, "function": {"arguments": {"city": "Paris"}}}],
    "noname": [{"index": 1, "id": "call_n", "function": {"arguments": "{\"zone\": \"UTC\"}"}}],
    "rename": [{"index": 0, "function": {"name": "get_time", "arguments": "{}"}}],
    "notarray": {"index": 0, "function": {"arguments": "{}"}},
}


def tool_chunk(tool_calls, model="test-model"):
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
            "choices": [{"index": 0, "delta": {"tool_calls": tool_calls}, "logprobs": None, "finish_reason": None}]}


def chunk(text, finish=None, model="test-model", role=False):
    delta = {"role": "assistant"} if role else ({"content": text} if text is not None else {})
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}


def event(obj, crlf=False):
    end = "\r\n" if crlf else "\n"
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return ("data: " + data + end + end).encode()


# The API prefixes a scenario's routes sit under: OpenAI's, and one like Gemini's.
API_PREFIX = r"(?:v1|v1beta/openai)"


def route_path(raw_path):
    """The request's path without its query; a bare host's /v1/... is the ok scenario's."""
    path = raw_path.split("?")[0]
    return "/ok" + path if path.startswith("/v1/") else path


class Handler(loopback_http.Handler):
    server_version = "powerhouse-fault-server"

    # --- plumbing ---
    def send_json(self, status, obj, headers=None):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_text(self, status, text, content_type="text/plain; charset=utf-8"):
        body = text if isinstance(text, bytes) else text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_stream(self, chunked=True):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.flush()
        self.chunked = chunked

    def write(self, data, piece=7, pause=0.001):
        """Writes bytes in small pieces, each flushed on its own, so that the client reads
        events, lines and characters split across reads."""
        for i in range(0, len(data), piece):
            part = data[i:i + piece]
            if self.chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            else:
                self.wfile.write(part)
            self.wfile.flush()
            if pause:
                time.sleep(pause)

    def end_stream(self):
        if self.chunked:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def drop(self):
        """Closes the connection in the middle of the body (no terminating chunk)."""
        self.wfile.flush()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    # --- routes ---
    def do_GET(self):
        path = route_path(self.path)
        m = re.fullmatch(r"(?:/(key-[\w.-]+|silent|echo))?/metrics/([\w.-]+)", path)
        if m:
            if m.group(1) == "echo":
                key = self.given_key()
                text = f"# the token {key} is not allowed here\n" if m.group(2) == "body" else f"up {key}\n"
                return self.send_text(200, text, "text/plain; version=0.0.4; charset=utf-8")
            if m.group(1) == "silent":
                time.sleep(30)
                return
            if m.group(1) and not self.key_ok(m.group(1)):
                return self.refuse_key()
            file = os.path.join(self.server.fixtures, m.group(2) + ".prom")
            if not os.path.isfile(file):
                return self.send_text(404, "no such fixture\n")
            with open(file, encoding="utf-8") as f:
                return self.send_text(200, f.read(), "text/plain; version=0.0.4; charset=utf-8")
        m = re.fullmatch(r"/([\w.-]+)/" + API_PREFIX + r"/models", path)
        if m:
            scenario = m.group(1)
            if scenario.startswith("key-") and not self.key_ok(scenario):
                return self.refuse_key()
            if scenario.startswith("status-") and scenario != "status-404":  # 404: an unknown model's
                return self.status(scenario)
            if scenario == "moved":
                return self.moved()
            if scenario == "stuck":
                time.sleep(60)
                return self.drop()
            if scenario == "errjson":
                return self.error_with_200()
            if scenario == "echo-list":
                return self.send_json(200, {"object": "denied", "detail": f"no models for {self.given_key()} here"})
            if scenario == "echo-moved":
                return self.moved_with_key()
            return self.send_json(200, {"object": "list", "data": [
                {"id": i, "object": "model", "created": 1700000000, "owned_by": "test"}
                for i in (ODD_MODELS if scenario == "oddids" else MODELS)]})
        m = re.fullmatch(r"/([\w.-]+)/last", path)
        if m:
            with self.server.lock:
                return self.send_json(200, self.server.last.get(m.group(1)))
        self.send_json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}})

    def do_POST(self):
        path = route_path(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        m = re.fullmatch(r"/([\w.-]+)/" + API_PREFIX + r"/chat/completions", path)
        if not m:
            return self.send_json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}})
        scenario = m.group(1)
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return self.send_json(400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}})
        with self.server.lock:
            self.server.last[scenario] = {"body": body, "authorization": self.headers.get("Authorization")}
        try:
            self.chat(scenario, body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def given_key(self):
        return (self.headers.get("Authorization") or "").removeprefix("Bearer ") or "none"

    def moved_with_key(self):
        self.send_response(308)
        self.send_header("Location", "/login?next=/ok/v1&token=" + self.given_key())
        self.send_header("Content-Length", "0")
        self.end_headers()

    def key_ok(self, scenario):
        return self.headers.get("Authorization") == "Bearer " + scenario[len("key-"):]

    def refuse_key(self):
        given = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        self.send_json(401, {"error": {"message": f"Incorrect API key provided: {given}.",
                                       "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}})

    def error_with_200(self):
        given = (self.headers.get("Authorization") or "").removeprefix("Bearer ") or "none"
        self.send_json(200, {"error": {"message": ERROR_JSON_MESSAGE.format(key=given), "type": "server_error",
                                       "param": None, "code": 503}})

    def moved(self):
        self.send_response(308)
        self.send_header("Location", "/ok/" + self.path.split("/", 2)[2])
        self.send_header("Content-Length", "0")
        self.end_headers()

    def status(self, scenario):
        code = int(scenario[len("status-"):])
        if code == 429:
            return self.send_json(429, {"error": {"message": "Rate limit reached for requests",
                                                  "type": "requests", "code": "rate_limit_exceeded"}},
                                  {"Retry-After": "7"})
        if code == 500:
            return self.send_json(500, {"error": {"message": "CUDA error: an illegal memory access was encountered",
                                                  "type": "server_error", "param": None, "code": None}})
        if code == 503:
            return self.send_text(503, "upstream connect error or disconnect/reset before headers\n")
        if code == 502:
            return self.send_text(502, BINARY_BODY, "application/octet-stream")
        if code == 404:
            return self.send_json(404, {"object": "error", "message": "The model `missing-model` does not exist.",
                                        "type": "NotFoundError", "param": None, "code": 404})
        if code == 400:
            return self.send_json(400, {"object": "error",
                                        "message": "This model's maximum context length is 2048 tokens. However, you "
                                                   "requested 5000 tokens (4000 in the messages, 1000 in the "
                                                   "completion).",
                                        "type": "BadRequestError", "param": None, "code": 400})
        if code == 401:
            return self.send_json(401, {"error": {"message": "You didn't provide an API key.",
                                                  "type": "invalid_request_error", "code": None}})
        self.send_json(code, {"error": {"message": f"status {code}", "type": "test"}})

    def chat(self, scenario, body):
        name, _, arg = scenario.partition("-")
        n = int(arg) if arg.isdigit() else 0
        model = body.get("model", "test-model") if isinstance(body, dict) else "test-model"
        usage = isinstance(body, dict) and (body.get("stream_options") or {}).get("include_usage")
        if name == "status":
            return self.status(scenario)
        if name == "ctxsize":
            return self.send_json(400, {"error": dict(LLAMA_CONTEXT_ERROR, n_prompt_tokens=5000, n_ctx=4096)})
        if name == "moved":
            return self.moved()
        if name == "page":
            return self.send_text(200, "<html><body>Sign in to use this network</body></html>", "text/html")
        if name == "key" and not self.key_ok(scenario):
            return self.refuse_key()
        if name == "silent":
            time.sleep(30)
            return self.drop()
        if name == "stuck":
            time.sleep(60)
            return self.drop()
        if name == "errjson":
            return self.error_with_200()
        if name == "nostreamopts" and isinstance(body, dict) and "stream_options" in body:
            return self.send_json(400, {"detail": [{"loc": ["body", "stream_options"], "msg": "Extra inputs are not "
                                                    "permitted (stream_options)", "type": "extra_forbidden"}]})
        if name == "json":
            text = "".join(ANSWER_PIECES)
            return self.send_json(200, {"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000,
                                        "model": model,
                                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                     "finish_reason": "stop"}],
                                        "usage": {"prompt_tokens": 11, "completion_tokens": len(ANSWER_PIECES),
                                                  "total_tokens": 11 + len(ANSWER_PIECES)}})
        if name == "tooljson":
            return self.send_json(200, {"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000,
                                        "model": model,
                                        "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                                                                             "tool_calls": TOOL_CALLS_WHOLE},
                                                     "finish_reason": "tool_calls"}],
                                        "usage": {"prompt_tokens": 11, "completion_tokens": 20,
                                                  "total_tokens": 31}})
        if name in ("tools", "toolbad", "toolcut"):
            return self.tools(name, arg, model, usage)
        if name == "thinkjson":
            message = {"role": "assistant", "content": "".join(ANSWER_PIECES), arg: "".join(THINKING_PIECES)}
            tokens = len(THINKING_PIECES) + len(ANSWER_PIECES)
            return self.send_json(200, {"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000,
                                        "model": model,
                                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                                        "usage": {"prompt_tokens": 11, "completion_tokens": tokens,
                                                  "total_tokens": 11 + tokens}})
        if name in ("think", "thinkcut"):
            return self.think(arg, model, usage, cut=name == "thinkcut")
        if name == "echo":
            return self.echo(arg)
        if name == "replay":
            with open(os.path.join(self.server.fixtures, arg + ".sse"), "rb") as f:
                data = f.read()
            self.start_stream()
            self.write(data, piece=97, pause=0)
            return self.end_stream()

        self.start_stream(chunked=name != "eof")
        if name == "headers":
            time.sleep(30)
            return self.drop()
        if name == "empty":
            return self.end_stream()
        crlf_all = name == "crlf"
        if name in ("toolcall", "blank"):
            self.write(event(chunk(None, model=model, role=True)))
            if name == "toolcall":
                call = {"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
                self.write(event({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000,
                                  "model": model, "choices": [{"index": 0, "delta": {"tool_calls": [call]},
                                                               "logprobs": None, "finish_reason": None}]}))
            self.write(event(chunk(None, finish="tool_calls" if name == "toolcall" else "stop", model=model)))
            self.write(event("[DONE]"))
            return self.end_stream()
        self.write(event(chunk(None, model=model, role=True), crlf_all))
        self.write(b": keep-alive\n\n")
        self.write(event(chunk(""), crlf_all))
        pieces = ANSWER_PIECES
        if name == "slow":
            pieces = [f" {i}" for i in range(400)]
        for i, piece in enumerate(pieces):
            if name in ("cut", "eof", "stall", "garbage", "junk", "errevent", "llamaerr") and i == n:
                break
            self.write(event(chunk(piece, model=model), crlf_all or i % 3 == 1))
            if name == "ping" and i % 4 == 1:
                self.write(b'event: ping\ndata: {"type": "ping"}\n\n')
                self.write(b"event: keepalive\ndata: 2026-01-01T00:00:00Z\nid: 7\n\n")
            if name == "slow":
                time.sleep(0.05)
        if name == "cut":
            return self.drop()
        if name == "eof":
            self.wfile.flush()
            return
        if name == "stall":
            time.sleep(30)
            return self.drop()
        if name == "garbage":
            self.write(("data: <html><body>" + "this is not JSON; " * 30 + "</body></html>\n\n").encode())
            return self.end_stream()
        if name == "junk":
            self.write(b"<html><head><title>502 Bad Gateway</title></head></html>\n\n")
            return self.end_stream()
        if name == "errevent":
            self.write(event({"error": {"message": "the engine failed: out of KV cache blocks", "type": "server_error",
                                        "code": 500}}))
            self.write(event("[DONE]"))
            return self.end_stream()
        if name == "llamaerr":
            self.write(("error: " + json.dumps(LLAMA_CONTEXT_ERROR) + "\n\n").encode())
            self.write(event("[DONE]"))
            return self.end_stream()
        self.write(event(chunk(None, finish="stop", model=model), crlf_all))
        if name == "cutend":
            return self.drop()
        if name == "stallend":
            time.sleep(30)
            return self.drop()
        if usage and name != "nousage":
            self.write(event({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000,
                              "model": model, "choices": [],
                              "usage": {"prompt_tokens": 11, "completion_tokens": len(pieces),
                                        "total_tokens": 11 + len(pieces)}}, crlf_all))
        if name != "nodone":
            self.write(event("[DONE]", crlf_all))
        self.end_stream()


    def tools(self, name, kind, model, usage):
        """The tools, toolbad-K and toolcut scenarios (see the file comment)."""
        self.start_stream()
        self.write(event(chunk(None, model=model, role=True)))
        if name != "toolbad":
            self.write(event(chunk("Let me check.", model=model)))
        pieces = TOOL_CALL_CHUNKS if name == "tools" else TOOL_CALL_CHUNKS[:2]
        for tool_calls in pieces:
            self.write(event(tool_chunk(tool_calls, model)))
        if name == "toolcut":
            return self.drop()
        if name == "toolbad":
            self.write(event(tool_chunk(BAD_TOOL_PIECES[kind], model)))
        self.write(event(chunk(None, finish="tool_calls", model=model)))
        if usage and name == "tools":
            self.write(event({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000,
                              "model": model, "choices": [],
                              "usage": {"prompt_tokens": 11, "completion_tokens": 20, "total_tokens": 31}}))
        self.write(event("[DONE]"))
        return self.end_stream()

    def think(self, field, model, usage, cut):
        """A reasoning model's answer: its thinking in the delta's `field` (with "content": null,
        as some servers write it), then its text, or the token limit before any text."""
        self.start_stream()
        self.write(event(chunk(None, model=model, role=True)))
        for piece in THINKING_PIECES:
            thought = chunk(None, model=model)
            thought["choices"][0]["delta"] = {field: piece, "content": None}
            self.write(event(thought))
        pieces = [] if cut else ANSWER_PIECES
        for piece in pieces:
            self.write(event(chunk(piece, model=model)))
        self.write(event(chunk(None, finish="length" if cut else "stop", model=model)))
        if usage:
            tokens = len(THINKING_PIECES) + len(pieces)
            self.write(event({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000,
                              "model": model, "choices": [],
                              "usage": {"prompt_tokens": 11, "completion_tokens": tokens,
                                        "total_tokens": 11 + tokens}}))
        self.write(event("[DONE]"))
        self.end_stream()

    def echo(self, what):
        """A server that quotes the key it was given where the client quotes the server."""
        key = self.given_key()
        if what == "completion":
            return self.send_json(200, {"object": "chat.completion", "note": f"key {key} accepted", "choices": []})
        if what == "moved":
            return self.moved_with_key()
        self.start_stream()
        self.write(event(chunk(ANSWER_PIECES[0])))
        if what == "event":
            self.write(event({"error": {"message": f"the key {key} has no quota left", "type": "server_error"}}))
            self.write(event("[DONE]"))
        elif what == "chunk":
            self.write(event({"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": f"denied {key}"}))
        elif what == "junk":
            self.write(f"<html><body>token {key} is not valid here</body></html>\n\n".encode())
        self.end_stream()


def make_certificate(folder):
    os.makedirs(folder, exist_ok=True)
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixtures", required=True, help="folder of the .prom and .sse fixtures")
    parser.add_argument("--tls", help="serve https with a self-signed certificate made in this folder")
    args = parser.parse_args()

    def setup(server):
        server.fixtures = args.fixtures
        server.lock = threading.Lock()
        server.last = {}
        if args.tls:
            cert, key = make_certificate(args.tls)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            server.socket = context.wrap_socket(server.socket, server_side=True)

    loopback_http.serve(Handler, setup)


if __name__ == "__main__":
    sys.exit(main())
