#!/usr/bin/env python3
"""`powerhouse-cli serve` fed a corpus of bad requests over raw sockets (so that the test, not
a client library, chooses every byte): malformed and hostile JSON, bodies past the limit,
wrong types for every field the server reads, invalid UTF-8, NULs and lone surrogates,
unknown models, paths and methods, HTTP/1.0, pipelining, clients that stall (a partial body,
slowloris headers) or vanish mid-stream. Each error must be an OpenAI-style error object
{"error": {"message", "type", "param", "code"}} with the right status, and after the corpus
the server must still answer a chat completion and exit 0 on SIGTERM.

Usage: bad_requests_test.py --cli PATH/powerhouse-cli [--model MODEL.gguf] [--slow FACTOR]
The model: --model, else $POWERHOUSE_TEST_MODEL, else the one scripts/fetch-test-model puts in
the cache. --slow scales the bounds on generation times (the ASan build passes 3).

Two servers run for the whole module: the corpus's, and one whose only clients are the
stalled ones of IoTimeouts (that server's I/O timeout is set short with --io-timeout; its
clients are started first and checked last, while the corpus runs).
"""
import argparse
import concurrent.futures
import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

from raw_http import (ARGS, Closed, Server, build, chat, exchange, metrics, post, read_head, read_response, request,
                      sse_events)

# A JSON schema whose $ref leads back to itself before anything is written.
LOOPING_SCHEMA = {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}
IO_TIMEOUT = 8  # the stalled clients' server's --io-timeout
SERVER = None    # the corpus's server (started again if a case kills it: see RawHttpCase)
CRASHES = []     # how it died, and in which case
STALLED = None   # the server of the stalled clients
STALLED_CLIENTS = []


def restart_if_dead(case):
    """A crash fails the case that caused it, not every case after it: the corpus's server
    is started again. True when it had died."""
    global SERVER
    if SERVER.alive():
        try:
            if request(SERVER, "GET", "/health", timeout=10 * ARGS.slow).status == 200:
                return False
        except (OSError, Closed):
            pass
        try:
            SERVER.proc.wait(timeout=5)  # a crash takes a moment
        except subprocess.TimeoutExpired:
            return False  # alive, only slow: the case's own assertions tell
    SERVER._drain.join(timeout=5)
    stderr = "".join(SERVER.stderr)[-1500:]
    CRASHES.append(f"{case}: serve died with {SERVER.proc.returncode} {stderr}")
    SERVER.proc.stdout.close()
    SERVER.proc.stderr.close()
    SERVER = Server("--parallel", "8")
    return True


def send_while_reading(s, *pieces):
    """Sends `pieces` on socket `s` from a thread while this one reads the answer (a server may
    answer, and close, before the request's end: the sender then stops quietly)."""
    def send():
        try:
            for piece in pieces:
                s.sendall(piece)
        except OSError:
            pass
    sender = threading.Thread(target=send)
    sender.start()
    try:
        with s.makefile("rb") as rfile:
            return read_response(rfile)
    finally:
        sender.join()

class RawHttpCase(unittest.TestCase):
    def setUp(self):
        restart_if_dead(f"before {self.id()}")

    def tearDown(self):
        if restart_if_dead(self.id()):
            self.fail(f"serve died during this case: {CRASHES[-1]}")

    def survived(self, what):
        """Within a loop of cases: fails this one (and restarts the server) if it killed it."""
        if restart_if_dead(what):
            self.fail(f"{what!r} kills the server: {CRASHES[-1]}")

    def assertApiError(self, r, status, param=..., code=..., what=None):
        """`r` has `status` and an OpenAI error body; param/code checked when given."""
        msg = f"{what!r}: {r!r}" if what is not None else repr(r)
        if isinstance(r, Exception):
            self.fail(f"no response: {msg}")
        self.assertEqual(r.status, status, msg)
        self.assertTrue(r.headers.get("content-type", "").startswith("application/json"), msg)
        body = r.json()
        self.assertEqual(list(body), ["error"], msg)
        err = body["error"]
        self.assertEqual(set(err), {"message", "type", "param", "code"}, msg)
        self.assertIsInstance(err["message"], str, msg)
        self.assertTrue(err["message"], msg)
        self.assertIsInstance(err["type"], str, msg)
        self.assertTrue(err["param"] is None or isinstance(err["param"], str), msg)
        self.assertTrue(err["code"] is None or isinstance(err["code"], str), msg)
        if param is not ...:
            self.assertEqual(err["param"], param, msg)
        if code is not ...:
            self.assertEqual(err["code"], code, msg)
        return err

    def assertCompletion(self, r, what=None):
        msg = f"{what!r}: {r!r}" if what is not None else repr(r)
        self.assertEqual(r.status, 200, msg)
        body = r.json()
        self.assertEqual(body["object"], "chat.completion", msg)
        self.assertIn(body["choices"][0]["finish_reason"], ("stop", "length"), msg)
        self.assertIsInstance(body["choices"][0]["message"]["content"], str, msg)
        return body


# ---------------------------------------------------------------------------------------

class MalformedJson(RawHttpCase):
    def test_malformed_bodies_are_400(self):
        m = SERVER.model.encode()
        good = b'{"model": "' + m + b'", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}'
        cases = {
            "empty": b"",
            "whitespace": b"   \n",
            "truncated": good[:-9],
            "truncated in a string": good[:good.index(b"hi") + 1],
            "truncated escape": b'{"model": "' + m + b'\\',
            "trailing garbage": good + b" xyz",
            "two documents": good + good,
            "trailing comma": good[:-1] + b", }",
            "NaN literal": good[:-1] + b', "temperature": NaN}',
            "Infinity literal": good[:-1] + b', "temperature": Infinity}',
            "-Infinity literal": good[:-1] + b', "temperature": -Infinity}',
            "single quotes": good.replace(b'"', b"'"),
            "comment": b"/* hi */" + good,
            "bare word": b"hello",
            "unquoted key": b'{model: "' + m + b'"}',
            "leading zeros": good[:-1] + b', "seed": 007}',
            "hex number": good[:-1] + b', "seed": 0x10}',
            "control character in a string": good.replace(b"hi", b"h\x01i"),
            "raw newline in a string": good.replace(b"hi", b"h\ni"),
            "bad escape": good.replace(b"hi", b"h\\qi"),
            "short unicode escape": good.replace(b"hi", b"h\\u12"),
            "NUL byte outside strings": good[:-1] + b"\x00}",
            "an array": b"[1, 2]",
            "a string": b'"hello"',
            "a number": b"42",
            "null": b"null",
        }
        for what, body in cases.items():
            with self.subTest(what):
                err = self.assertApiError(post(SERVER, body), 400, what=what)
                self.assertEqual(err["type"], "invalid_request_error")

    def test_deep_nesting_does_not_crash_the_parser(self):
        m = SERVER.model
        depth = 100000
        deep_array = b"[" * depth + b"]" * depth
        deep_object = b'{"a":' * depth + b"1" + b"}" * depth
        cases = [
            ("100000 nested arrays", deep_array, None),
            ("100000 nested objects", deep_object, "model"),
            ("100000 unclosed arrays", b"[" * depth, None),
            ("100000 unclosed objects", b'{"a":' * depth, None),
            # A field the server does not read, followed by another key: 400 for the model-less
            # body, but first the parse must survive (an object's members are moved, not copied).
            ("nested arrays in an unknown field, then more keys",
             b'{"x": ' + deep_array + b', "model": 5, "messages": []}', "model"),
            ("nested arrays as the content", json.dumps(chat(m)).encode().replace(b'"hi"', deep_array),
             "messages[0].content"),
            ("nested arrays as the last content", b'{"model": "' + m.encode() + b'", "max_tokens": 2, "messages": '
             b'[{"role": "user", "content": ' + deep_array + b'}]}', "messages[0].content"),
            ("nested arrays as the stop", json.dumps(chat(m, stop="x")).encode().replace(b'"x"', deep_array), "stop"),
            ("nested objects as a message", json.dumps(chat(m)).encode().replace(
                b'{"role": "user", "content": "hi"}', deep_object), "messages[0]"),
            ("nested arrays as max_tokens", json.dumps(chat(m)).encode().replace(b'"max_tokens": 2',
                                                                                  b'"max_tokens": ' + deep_array),
             "max_tokens"),
            ("nested arrays as stream_options", json.dumps(chat(m, stream_options=0)).encode().replace(
                b'"stream_options": 0', b'"stream_options": ' + deep_array), "stream_options"),
            ("nested objects as a tool's parameters", json.dumps(chat(m, tools=[{"type": "function", "function": {
                "name": "f", "parameters": 0}}])).encode().replace(b'"parameters": 0', b'"parameters": ' + deep_object),
             ...),
            ("nested objects as a tool call's arguments", json.dumps({
                "model": m, "max_tokens": 2, "messages": [
                    {"role": "assistant", "content": None,
                     "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": 0}}]},
                    {"role": "user", "content": "hi"}]}).encode().replace(b'"arguments": 0',
                                                                          b'"arguments": ' + deep_object), ...),
            ("nested objects as a tool call's arguments text", json.dumps({
                "model": m, "max_tokens": 2, "messages": [
                    {"role": "assistant", "content": None,
                     "tool_calls": [{"id": "1", "type": "function",
                                     "function": {"name": "f", "arguments": deep_object.decode()}}]},
                    {"role": "user", "content": "hi"}]}).encode(), ...),
            ("nested objects as a JSON schema", json.dumps(chat(m, response_format={
                "type": "json_schema", "json_schema": {"name": "x", "schema": 0}})).encode().replace(
                b'"schema": 0', b'"schema": ' + deep_object), ...),
        ]
        # Past 64 levels the body is refused before it is parsed, as a whole (no field named).
        for what, body, _ in cases:
            with self.subTest(what):
                try:
                    r = post(SERVER, body)
                except (Closed, ConnectionError) as e:
                    r = e
                self.survived(f"{what} ({len(body)} bytes)")
                self.assertApiError(r, 400, what=what)
                self.assertIn("nests deeper", r.json()["error"]["message"], what)

    def test_a_body_of_nested_brackets_up_to_the_limit_does_not_exhaust_memory(self):
        # 4 MiB of '[' is a million levels of nesting; the parse should give up early (a depth
        # limit) instead of building four million arrays. Bound: 64 MiB of resident memory more.
        SERVER.reset_peak_rss()
        before = SERVER.rss_kib()
        r = post(SERVER, b"[" * (4 << 20), timeout=120 * ARGS.slow)
        self.assertApiError(r, 400)
        grown = SERVER.rss_kib("VmHWM") - before
        self.assertLess(grown, 64 << 10, f"parsing 4 MiB of '[' took {grown >> 10} MiB more memory")

    def test_invalid_utf8_in_a_string_is_400(self):
        m = SERVER.model.encode()
        for what, raw in {"0xff 0xfe": b"\xff\xfe", "a lone continuation byte": b"\x80",
                          "an overlong '/'": b"\xc0\xaf", "a truncated euro sign": b"\xe2\x82",
                          "a truncated euro sign at the end": b"x\xe2\x82",
                          "an encoded surrogate (CESU-8)": b"\xed\xa0\x80", "past U+10FFFF": b"\xf4\x90\x80\x80",
                          "latin-1": "caf\xe9".encode("latin-1")}.items():
            for where, body in {
                "content": b'{"model": "' + m + b'", "messages": [{"role": "user", "content": "' + raw + b'"}]}',
                "model": b'{"model": "' + m + raw + b'", "messages": [{"role": "user", "content": "hi"}]}',
                "a key": b'{"model": "' + m + b'", "' + raw + b'": 1, "messages": [{"role": "user", "content": "hi"}]}',
                "stop": b'{"model": "' + m + b'", "stop": "' + raw + b'", "messages": [{"role": "user", "content": "hi"}]}',
            }.items():
                with self.subTest(what=what, where=where):
                    self.assertApiError(post(SERVER, body), 400, what=(what, where))

    def test_nul_and_surrogate_escapes(self):
        m = SERVER.model
        # A NUL is a valid code point: answered. Lone surrogates are not characters: 400.
        for what, text in {"a NUL": "a\\u0000b", "a NUL alone": "\\u0000", "a surrogate pair": "smile \\ud83d\\ude00",
                           "a NUL before a special token": "\\u0000<|im_end|>"}.items():
            with self.subTest(what):
                body = ('{"model": "%s", "max_tokens": 2, "temperature": 0, "messages": [{"role": "user", '
                        '"content": "%s"}]}' % (m, text)).encode()
                self.assertCompletion(post(SERVER, body), what)
        body = ('{"model": "%s", "max_tokens": 2, "temperature": 0, "stop": ["\\u0000"], '
                '"messages": [{"role": "user", "content": "hi"}]}' % m).encode()
        self.assertCompletion(post(SERVER, body), "a NUL stop string")
        for what, text in {"a lone high surrogate": "\\ud800", "a lone low surrogate": "\\udc00",
                           "a reversed pair": "\\udc00\\ud800", "a high surrogate at the end": "x\\udbff",
                           "a high surrogate then a letter": "\\ud800a"}.items():
            with self.subTest(what):
                body = ('{"model": "%s", "max_tokens": 2, "messages": [{"role": "user", "content": "%s"}]}'
                        % (m, text)).encode()
                self.assertApiError(post(SERVER, body), 400, what=what)
        r = post(SERVER, ('{"model": "%s\\u0000", "messages": [{"role": "user", "content": "hi"}]}' % m).encode())
        self.assertApiError(r, 404, param="model", code="model_not_found")
        r = post(SERVER, ('{"model": "%s", "messages": [{"role": "us\\u0000er", "content": "hi"}]}' % m).encode())
        self.assertApiError(r, 400, param="messages[0].role")


class WrongTypes(RawHttpCase):
    def test_every_field_the_server_reads_with_a_wrong_value_is_400(self):
        m = SERVER.model
        user = {"role": "user", "content": "hi"}
        cases = [
            # (field, value, param) ; value None-able fields use ... for "absent"
            ("model", 5, "model"), ("model", None, "model"), ("model", [m], "model"), ("model", {"id": m}, "model"),
            ("model", True, "model"), ("model", ..., "model"),
            ("messages", "hi", "messages"), ("messages", {}, "messages"), ("messages", [], "messages"),
            ("messages", None, "messages"), ("messages", ..., "messages"), ("messages", [5], "messages[0]"),
            ("messages", [["user", "hi"]], "messages[0]"), ("messages", [user, "hi"], "messages[1]"),
            ("messages", [{"content": "hi"}], "messages[0]"), ("messages", [{"role": 5, "content": "hi"}], "messages[0]"),
            ("messages", [{"role": None, "content": "hi"}], "messages[0]"),
            ("messages", [{"role": ["user"], "content": "hi"}], "messages[0]"),
            ("messages", [{"role": "wizard", "content": "hi"}], "messages[0].role"),
            ("messages", [{"role": "USER", "content": "hi"}], "messages[0].role"),
            ("messages", [{"role": "tool", "content": "hi"}], "messages[0].tool_call_id"),
            ("messages", [{"role": "tool", "content": "hi", "tool_call_id": 5}], "messages[0].tool_call_id"),
            ("messages", [{"role": "assistant", "content": None, "tool_calls": "x"}, user], "messages[0].tool_calls"),
            ("messages", [{"role": "assistant", "content": None, "tool_calls": [5]}, user], "messages[0].tool_calls[0]"),
            ("messages", [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": 5}}]}, user],
             "messages[0].tool_calls[0].function.name"),
            ("messages", [{"role": "assistant", "content": None,
                           "tool_calls": [{"function": {"name": "f", "arguments": "{not json"}}]}, user],
             "messages[0].tool_calls[0].function.arguments"),
            ("messages", [{"role": "assistant", "content": None,
                           "tool_calls": [{"function": {"name": "f", "arguments": 5}}]}, user],
             "messages[0].tool_calls[0].function.arguments"),
            ("messages", [{"role": "user", "content": 5}], "messages[0].content"),
            ("messages", [{"role": "user", "content": True}], "messages[0].content"),
            ("messages", [{"role": "user", "content": {"text": "hi"}}], "messages[0].content"),
            ("messages", [{"role": "user", "content": ["hi"]}], "messages[0].content"),
            ("messages", [{"role": "user", "content": [{"type": "text"}]}], "messages[0].content"),
            ("messages", [{"role": "user", "content": [{"type": "text", "text": 5}]}], "messages[0].content"),
            ("messages", [{"role": "user", "content": [{"type": "text", "text": None}]}], "messages[0].content"),
            ("messages", [{"role": "user", "content": [{"text": "hi"}]}], "messages[0].content"),
            ("messages", [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
             "messages[0].content"),
            ("messages", [{"role": "user", "content": [{"type": 5, "text": "hi"}]}], "messages[0].content"),
            ("messages", [{"role": "user", "content": [{"type": None, "text": "hi"}]}], "messages[0].content"),
            ("max_tokens", "16", "max_tokens"), ("max_tokens", 16.5, "max_tokens"), ("max_tokens", 16.0, "max_tokens"),
            ("max_tokens", -1, "max_tokens"), ("max_tokens", 0, "max_tokens"), ("max_tokens", 1e30, "max_tokens"),
            ("max_tokens", 2**31, "max_tokens"), ("max_tokens", 2**32 + 4, "max_tokens"),
            ("max_tokens", 2**63, "max_tokens"), ("max_tokens", 2**64 - 1, "max_tokens"),
            ("max_tokens", 2**64, "max_tokens"), ("max_tokens", -2**63, "max_tokens"), ("max_tokens", 10**30, "max_tokens"),
            ("max_tokens", True, "max_tokens"), ("max_tokens", [16], "max_tokens"), ("max_tokens", 2049, "max_tokens"),
            ("max_completion_tokens", "16", "max_completion_tokens"),
            ("max_completion_tokens", 2**63, "max_completion_tokens"),
            ("max_completion_tokens", -5, "max_completion_tokens"),
            ("temperature", -1, "temperature"), ("temperature", 3, "temperature"), ("temperature", "x", "temperature"),
            ("temperature", "0.5", "temperature"), ("temperature", 2.0001, "temperature"),
            ("temperature", True, "temperature"), ("temperature", [0], "temperature"),
            ("temperature", 1e300 * 10, None), ("temperature", -0.0001, "temperature"),
            ("top_p", -0.1, "top_p"), ("top_p", 1.1, "top_p"), ("top_p", "x", "top_p"), ("top_p", {}, "top_p"),
            ("presence_penalty", 3, "presence_penalty"), ("presence_penalty", "x", "presence_penalty"),
            ("frequency_penalty", -3, "frequency_penalty"), ("frequency_penalty", [1], "frequency_penalty"),
            ("seed", 1.5, "seed"), ("seed", 7.0, "seed"), ("seed", 1e30, "seed"), ("seed", 2**64, "seed"),
            ("seed", 10**30, "seed"), ("seed", "7", "seed"), ("seed", True, "seed"),
            ("stop", ["a", "b", "c", "d", "e"], "stop"), ("stop", 5, "stop"), ("stop", [5], "stop"),
            ("stop", ["a", None], "stop"), ("stop", [["a"]], "stop"), ("stop", {"a": 1}, "stop"), ("stop", True, "stop"),
            ("stream", "yes", "stream"), ("stream", 1, "stream"), ("stream", "true", "stream"), ("stream", [], "stream"),
            ("stream_options", {"include_usage": "yes"}, "stream_options.include_usage"),
            ("stream_options", {"include_usage": 1}, "stream_options.include_usage"),
            ("stream_options", "yes", "stream_options"), ("stream_options", 5, "stream_options"),
            ("stream_options", [True], "stream_options"),
            ("n", 2, "n"), ("n", 0, "n"), ("n", "1", "n"),
            ("logprobs", "yes", "logprobs"), ("logprobs", [True], "logprobs"), ("logprobs", 1, "logprobs"),
            ("top_logprobs", 3, "top_logprobs"), ("top_logprobs", "3", "top_logprobs"),
            ("speculative.n_max", 65, "speculative.n_max"), ("speculative.n_max", -1, "speculative.n_max"),
            ("speculative.n_max", "8", "speculative.n_max"), ("speculative.n_max", 8.5, "speculative.n_max"),
            ("tools", "x", "tools"), ("tools", {}, "tools"), ("tools", [{}], "tools[0]"), ("tools", [5], "tools[0]"),
            ("tools", [{"type": 5, "function": {"name": "f"}}], "tools[0]"),
            ("tools", [{"type": None, "function": {"name": "f"}}], "tools[0]"),
            ("tools", [{"type": "function", "function": {"name": ""}}], "tools[0].function.name"),
            ("tools", [{"type": "function", "function": {"name": "f", "parameters": "x"}}],
             "tools[0].function.parameters"),
            ("tool_choice", "sometimes", "tool_choice"), ("tool_choice", 5, "tool_choice"),
            ("tool_choice", {"type": 5}, "tool_choice"), ("tool_choice", "required", "tool_choice"),
            ("response_format", {"type": 5}, "response_format"), ("response_format", "json", "response_format"),
            ("response_format", {}, "response_format"), ("response_format", {"type": "yaml"}, "response_format.type"),
            ("response_format", {"type": "json_schema"}, "response_format.json_schema"),
            ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": 5}},
             "response_format.json_schema"),
            # A schema whose $ref leads back to itself before anything is written cannot become
            # a grammar: the client's mistake (400 naming the schema), not the server's (500).
            ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": LOOPING_SCHEMA}},
             "response_format.json_schema.schema"),
            ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": {
                "$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}}}}},
             "response_format.json_schema.schema"),
            # Biases for tokens this model does not have (SmolLM2: ids 0 to 49151), out of range,
            # or not keyed by token ids.
            ("logit_bias", {"50256": -100}, "logit_bias"), ("logit_bias", "x", "logit_bias"),
            ("logit_bias", [1], "logit_bias"), ("logit_bias", {"12": 101}, "logit_bias"),
            ("logit_bias", {"12": "x"}, "logit_bias"), ("logit_bias", {"12": None}, "logit_bias"),
            ("logit_bias", {"abc": 1}, "logit_bias"), ("logit_bias", {"-3": 1}, "logit_bias"),
            ("logit_bias", {"1.5": 1}, "logit_bias"), ("logit_bias", {"": 1}, "logit_bias"),
            ("logit_bias", {"99999999999999999999": 1}, "logit_bias"),
            # What the server cannot do is refused, never ignored: the legacy function-calling
            # fields (the answer would be plain text).
            ("functions", [{"name": "f", "parameters": {"type": "object"}}], "functions"),
            ("functions", "x", "functions"), ("function_call", {"name": "f"}, "function_call"),
            ("function_call", 5, "function_call"),
        ]
        looping_tool = [{"type": "function", "function": {"name": "f", "parameters": LOOPING_SCHEMA}}]
        cases += [("tool_choice", "required", "tools[0].function.parameters"),
                  ("tool_choice", {"type": "function", "function": {"name": "f"}}, "tools[0].function.parameters")]
        for field, value, param in cases:
            with self.subTest(field=field, value=value):
                body = {"model": m, "messages": [user], "max_tokens": 2, "stream": True,
                        "stream_options": {"include_usage": True}}
                if field in ("stream", "stream_options"):
                    body["stream"] = True
                if value is ...:
                    body.pop(field, None)
                else:
                    body[field] = value
                if field == "tool_choice" and param.startswith("tools"):
                    body["tools"] = looping_tool
                if field == "temperature" and param is None:  # infinity: JSON has no literal, 1e999 parses as inf
                    raw = json.dumps(body).replace("Infinity", "1e999").encode()
                    self.assertApiError(post(SERVER, raw), 400, param="temperature", what=(field, "1e999"))
                    continue
                self.assertApiError(post(SERVER, body), 400, param=param, what=(field, value))
                self.survived((field, value))

    def test_the_text_completion_fields(self):
        m = SERVER.model
        for field, value, param in [("prompt", 5, "prompt"), ("prompt", [1, 2, 3], "prompt"), ("prompt", "", "prompt"),
                                    ("prompt", [["a"]], "prompt"), ("prompt", ["a", "b"], "prompt"),
                                    ("prompt", None, "prompt"), ("prompt", ..., "prompt"),
                                    ("max_tokens", "x", "max_tokens"), ("echo", True, "echo"),
                                    ("best_of", 2, "best_of"), ("logprobs", "x", "logprobs"),
                                    ("logprobs", 6, "logprobs"), ("logprobs", -1, "logprobs"), ("suffix", "x", "suffix"),
                                    ("model", 5, "model"), ("echo", "yes", "echo"), ("echo", 1, "echo"),
                                    ("logit_bias", {"1": 500}, "logit_bias")]:
            with self.subTest(field=field, value=value):
                body = {"model": m, "prompt": "Once", "max_tokens": 2}
                if value is ...:
                    body.pop(field)
                else:
                    body[field] = value
                self.assertApiError(post(SERVER, body, path="/v1/completions"), 400, param=param, what=(field, value))

    def test_edge_values_that_are_valid_are_answered(self):
        m = SERVER.model
        for extra in [dict(max_tokens=1), dict(max_completion_tokens=1), dict(temperature=0), dict(temperature=2),
                      dict(top_p=0), dict(top_p=1), dict(seed=-1), dict(seed=0), dict(seed=2**63 - 1), dict(seed=2**63),
                      dict(seed=2**64 - 1), dict(stop=[]), dict(stop=["a", "b", "c", "d"]), dict(stop=None),
                      dict(stream=False), dict(stream=None), dict(n=1), dict(n=None), dict(logprobs=False),
                      dict(tools=[]), dict(response_format={"type": "text"}), dict(user="someone"),
                      dict(logit_bias={}), dict(logit_bias=None), dict(logit_bias={"0": 100, "49151": -100}),
                      dict(logit_bias={"7": 0.5}), dict(functions=[]), dict(function_call="none"),
                      dict(function_call="auto"),
                      dict(unknown_field={"a": [1, 2]})]:
            with self.subTest(extra=extra):
                self.assertCompletion(post(SERVER, chat(m, **{"max_tokens": 2, **extra})), extra)


class Routing(RawHttpCase):
    def test_unknown_model_is_404(self):
        for path, body in [("/v1/chat/completions", chat("no-such-model")),
                           ("/v1/completions", {"model": "no-such-model", "prompt": "Once", "max_tokens": 2}),
                           ("/v1/chat/completions", chat(SERVER.model.upper())),
                           ("/v1/chat/completions", chat(SERVER.model + " ")),
                           ("/v1/chat/completions", chat(""))]:
            with self.subTest(path=path, model=body["model"]):
                err = self.assertApiError(post(SERVER, body, path=path), 404, param="model", code="model_not_found")
                self.assertIn(repr(body["model"])[1:-1], err["message"])

    def test_unknown_path_is_404(self):
        for method, path in [("GET", "/v1/nothing"), ("POST", "/v1/nothing"), ("GET", "/"), ("GET", "/v1"),
                             ("GET", "/v1/models/x/y"), ("GET", "/../../etc/passwd"), ("GET", "/health/"),
                             ("POST", "/v1/chat/completions/"), ("POST", "/V1/CHAT/COMPLETIONS"),
                             ("GET", "/%00"), ("GET", "/v1/%e2%82%ac")]:
            with self.subTest(method=method, path=path):
                body = json.dumps(chat(SERVER.model)).encode() if method == "POST" else b""
                self.assertApiError(request(SERVER, method, path, body), 404, what=(method, path))

    def test_a_path_that_is_not_utf8_is_404(self):
        # The 404 message quotes the path: it must not be dumped as JSON unchecked.
        for method, path in [("GET", b"/v1/%ff%fe"), ("GET", b"/\xff"), ("POST", b"/%c0"),
                             ("GET", b"/v1/models%ed%a0%80")]:
            with self.subTest(method=method, path=path):
                raw = (method.encode() + b" " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                       b"Connection: close\r\n\r\n")
                try:
                    r = exchange(SERVER, raw, method)
                except (Closed, ConnectionError) as e:
                    r = e
                self.survived((method, path))
                self.assertApiError(r, 404, what=(method, path))

    def test_requests_the_library_cannot_read_say_what_is_wrong(self):
        # cpp-httplib refuses these before any handler; the error said only "the request could
        # not be handled".
        for what, raw, status, says in [
                ("HTTP/9.9", b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", 400, "HTTP/1.1"),
                ("no method", b"/health HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request line"),
                ("a bad range", b"GET /metrics HTTP/1.1\r\nHost: x\r\nRange: pages=1\r\nConnection: close\r\n\r\n",
                 416, "Range")]:
            with self.subTest(what):
                try:
                    r = exchange(SERVER, raw, timeout=10)
                except (Closed, ConnectionError) as e:
                    self.fail(f"{what}: no answer ({e!r})")
                err = self.assertApiError(r, status, what=what)
                self.assertIn(says, err["message"], what)

    def test_a_long_path_is_refused(self):
        r = request(SERVER, "GET", "/" + "a" * 20000)
        self.assertIn(r.status, (404, 414), r)
        self.assertTrue(SERVER.alive())

    def test_wrong_method(self):
        # 405 with an Allow header is what RFC 9110 asks for a path that exists; 404 is what
        # cpp-httplib answers without a route for the method. Either, with a JSON error body.
        statuses = {}
        for method, path in [("GET", "/v1/chat/completions"), ("PUT", "/v1/chat/completions"),
                             ("DELETE", "/v1/chat/completions"), ("PATCH", "/v1/completions"), ("POST", "/health"),
                             ("POST", "/v1/models"), ("DELETE", "/v1/models"), ("OPTIONS", "/v1/chat/completions")]:
            with self.subTest(method=method, path=path):
                body = b"{}" if method in ("PUT", "PATCH", "POST") else b""
                r = request(SERVER, method, path, body)
                statuses[f"{method} {path}"] = r.status
                self.assertIn(r.status, (404, 405), r)
                self.assertApiError(r, r.status, what=(method, path))
                if r.status == 405:
                    self.assertIn("allow", r.headers)
        print(f"\n  wrong methods answer: {statuses}", file=sys.stderr)
        r = request(SERVER, "BREW", "/health")
        self.assertIn(r.status, (400, 405, 501), r)
        r = request(SERVER, "HEAD", "/health")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"")

    def test_missing_or_other_content_type(self):
        # The server reads the body as JSON whatever the Content-Type says (as llama-server does).
        body = json.dumps(chat(SERVER.model)).encode()
        for content_type in [None, "text/plain", "application/json; charset=utf-8"]:
            with self.subTest(content_type=content_type):
                self.assertCompletion(request(SERVER, "POST", "/v1/chat/completions", body, content_type=content_type),
                                      content_type)


class Framing(RawHttpCase):
    def test_a_body_past_the_limit_is_413_and_the_limit_itself_is_read(self):
        limit = 8 << 20
        head = json.dumps(chat("no-such-model")).encode()
        for size, status in [(limit, 404), (limit + 1, 413), (limit + (1 << 20), 413)]:
            with self.subTest(size=size):
                body = head[:-1] + b" " * (size - len(head)) + b"}"
                self.assertEqual(len(body), size)
                with SERVER.connect(60 * ARGS.slow) as s:
                    r = send_while_reading(s, build("POST", "/v1/chat/completions", body))
                err = self.assertApiError(r, status)
                if status == 413:
                    self.assertIn("too large", err["message"])

    def test_a_chunked_body_past_the_limit_is_413(self):
        chunk = b" " * (1 << 20)
        with SERVER.connect(60 * ARGS.slow) as s:
            r = send_while_reading(s, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                   b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n", b"2\r\n{}\r\n",
                                   *[b"%x\r\n" % len(chunk) + chunk + b"\r\n"] * 12, b"0\r\n\r\n")
        self.assertApiError(r, 413)

    def test_a_chunked_body_is_not_held_past_the_limit(self):
        # cpp-httplib 0.11 bounds only a body with a Content-Length: a chunked one was held
        # whole before the 413 (256 MiB sent, 256 MiB more memory), to any path. The server
        # reads it through a bounded receiver instead: what is past the limit is dropped.
        chunk = b" " * (1 << 20)
        for path, status in [("/v1/chat/completions", 413), ("/v1/completions", 413), ("/nowhere", 404),
                             ("/health", 404)]:
            with self.subTest(path=path):
                SERVER.reset_peak_rss()
                before = SERVER.rss_kib()
                with SERVER.connect(120 * ARGS.slow) as s:
                    r = send_while_reading(s, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                                           b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                                           b"Connection: close\r\n\r\n2\r\n{}\r\n",
                                           *[b"%x\r\n" % len(chunk) + chunk + b"\r\n"] * 256, b"0\r\n\r\n")
                grown = SERVER.rss_kib("VmHWM") - before
                self.assertApiError(r, status, what=path)
                self.assertLess(grown, 96 << 10, f"{path}: a 256 MiB chunked body cost {grown >> 10} MiB more memory")

    def test_compressed_bodies(self):
        # cpp-httplib inflates a gzip or deflate body (Content-Encoding) as it reads it: under
        # 1 MiB sent can be 512 MiB inflated, which it held whole. Read through the bounded
        # receiver, the inflated bytes past the limit are dropped: 413, memory bounded. A body
        # that is not what its encoding says, or an encoding the server lacks (which the library
        # read as if there were none), gets a message that names the encoding.
        body = json.dumps(chat(SERVER.model)).encode()
        bomb = gzip.compress(body[:-1] + b" " * (512 << 20) + b"}", compresslevel=9)
        for what, encoding, data, status, says in [
                ("gzip", "gzip", gzip.compress(body), 200, None),
                ("a gzip bomb", "gzip", bomb, 413, "too large"),
                ("deflate that is not", "deflate", body, 400, "deflate"),
                ("br that is not", "br", body, 400, "br"),
                ("zstd", "zstd", body, 415, "zstd"),
                ("two encodings", "gzip, br", body, 415, "gzip, br")]:
            with self.subTest(what):
                SERVER.reset_peak_rss()
                before = SERVER.rss_kib()
                raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Encoding: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                       % (encoding.encode(), len(data)) + data)
                r = exchange(SERVER, raw, "POST", timeout=120 * ARGS.slow)
                grown = SERVER.rss_kib("VmHWM") - before
                if status == 200:
                    self.assertCompletion(r, what)
                else:
                    err = self.assertApiError(r, status, what=what)
                    self.assertIn(says, err["message"], what)
                self.assertLess(grown, 96 << 10, f"{what}: {len(data)} bytes sent cost {grown >> 10} MiB more memory")

    def test_bodies_without_a_length_are_refused_at_once(self):
        # A POST with neither Content-Length nor chunked encoding has no end but the closed
        # connection: cpp-httplib read it until then (the client waited out the 30 s I/O
        # timeout for a 400, and the bytes were held without a bound). 411 at once instead
        # (RFC 9110 15.5.12), and 501 for a transfer coding the server cannot read (RFC 9112 6.1).
        body = json.dumps(chat(SERVER.model)).encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        for what, headers, status in [
                ("no length", b"", 411),
                ("Transfer-Encoding: gzip, chunked", b"Transfer-Encoding: gzip, chunked\r\n", 501),
                ("Transfer-Encoding: identity", b"Transfer-Encoding: identity\r\n", 501)]:
            with self.subTest(what):
                errors = metrics(SERVER)["powerhouse_request_errors_total"]
                start = time.monotonic()
                try:
                    r = exchange(SERVER, head + headers + b"\r\n" + body, "POST", timeout=10)  # no generation
                except (Closed, socket.timeout, ConnectionError) as e:
                    self.fail(f"{what}: no answer ({e!r}) after {time.monotonic() - start:.1f} s")
                err = self.assertApiError(r, status, what=what)
                self.assertIn("Content-Length" if status == 411 else "chunked", err["message"], what)
                # Refused before routing, and still counted in /metrics.
                self.assertEqual(metrics(SERVER)["powerhouse_request_errors_total"], errors + 1, what)

    def test_bad_content_lengths_are_refused_at_once(self):
        # A length that is not a number: refused on reading the header (400), not after waiting
        # 30 s for bytes that will not come. Two lengths that differ: 400 (RFC 9112 6.3: a
        # framing error). A length past the limit is left to cpp-httplib, which reads (and
        # drops) what is sent before its 413, so that an honest client sending a big body reads
        # the 413 instead of a broken pipe; one that declares much and sends little is among
        # the stalled clients (IoTimeouts).
        body = json.dumps(chat(SERVER.model)).encode()
        for what, header, statuses in [
                ("negative", b"Content-Length: -1", (400,)),
                ("not a number", b"Content-Length: abc", (400,)),
                ("past 2^64", b"Content-Length: 99999999999999999999999", (400, 413)),
                ("two that differ", b"Content-Length: %d\r\nContent-Length: 5" % len(body), (400,))]:
            with self.subTest(what):
                raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
                       header + b"\r\nConnection: close\r\n\r\n" + body)
                start = time.monotonic()
                try:
                    r = exchange(SERVER, raw, "POST", timeout=10)  # an answer takes no generation
                except (Closed, socket.timeout, ConnectionError) as e:
                    self.fail(f"{what}: no answer ({e!r}) after {time.monotonic() - start:.1f} s")
                self.assertIn(r.status, statuses, (what, r))

    def test_headers_past_a_bound_are_refused(self):
        # One header line longer than cpp-httplib's 8 KiB, then 4 MiB of small headers: refused
        # (431, 400, or the connection closed) without holding them all (cpp-httplib 0.11 has no
        # bound on the number of header lines: 128 MiB of them cost the server 1.8 GiB).
        for what, headers in [("a 64 KiB header", b"X-Big: " + b"a" * 65536 + b"\r\n"),
                              ("4 MiB of headers", b"X-A: b\r\n" * (4 << 17))]:
            with self.subTest(what):
                SERVER.reset_peak_rss()
                before = SERVER.rss_kib()
                with SERVER.connect(60 * ARGS.slow) as s:
                    try:
                        status = send_while_reading(s, b"GET /health HTTP/1.1\r\nHost: x\r\n" + headers +
                                                    b"Connection: close\r\n\r\n").status
                    except (Closed, ConnectionError):
                        status = "closed"
                grown = SERVER.rss_kib("VmHWM") - before
                self.assertIn(status, (400, 413, 431, "closed"), f"{what}: answered {status}, with a peak of "
                                                                 f"{grown >> 10} MiB more memory")
                # cpp-httplib 0.11 reads every header line before a handler can refuse them (431 from
                # the server's pre-routing check): the peak is bounded by what a client can send
                # within the read timeout, not by the server. 4 MiB of headers cost ~55 MiB.
                self.assertLess(grown, 128 << 10, f"{what}: {grown >> 10} MiB more memory")

    def test_a_pipelined_pair_on_one_keep_alive_connection(self):
        first = build("POST", "/v1/chat/completions", json.dumps(chat(SERVER.model, "Say hi.", max_tokens=3)).encode())
        second = build("GET", "/health")
        third = build("GET", "/v1/models", headers={"Connection": "close"})
        with SERVER.connect(60 * ARGS.slow) as s:
            s.sendall(first + second + third)
            with s.makefile("rb") as rfile:
                r1 = read_response(rfile, "POST")
                try:
                    r2 = read_response(rfile)
                    r3 = read_response(rfile)
                except Closed:
                    # cpp-httplib 0.11 drops requests pipelined behind one with a body and closes
                    # the connection (a known limitation of the library, not fixed here): the
                    # client sees a clean close, never a wrong answer or a hang.
                    r2 = r3 = None
                if r2 is not None:
                    self.assertEqual(rfile.read(), b"", "the server closes after Connection: close")
        self.assertCompletion(r1)
        if r2 is not None:
            self.assertEqual(r2.status, 200, r2)
            self.assertEqual(r2.json(), {"status": "ok"})
            self.assertEqual(r3.status, 200, r3)
            self.assertEqual(r3.json()["data"][0]["id"], SERVER.model)
        self.assertEqual(exchange(SERVER, build("GET", "/health")).status, 200, "the server still answers")

    def test_keep_alive_serves_requests_in_turn(self):
        with SERVER.connect(60 * ARGS.slow) as s, s.makefile("rb") as rfile:
            for i in range(2):  # cpp-httplib closes a connection after 5 requests
                s.sendall(build("POST", "/v1/chat/completions", json.dumps(chat(SERVER.model, f"Number {i}")).encode()))
                self.assertCompletion(read_response(rfile, "POST"))
                s.sendall(build("POST", "/v1/chat/completions", b"{bad"))
                self.assertApiError(read_response(rfile, "POST"), 400)

    def test_http_1_0_without_host(self):
        r = exchange(SERVER, b"GET /health HTTP/1.0\r\n\r\n")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"status": "ok"})
        body = json.dumps(chat(SERVER.model)).encode()
        raw = build("POST", "/v1/chat/completions", body, version="HTTP/1.0", host=False)
        with SERVER.connect(60 * ARGS.slow) as s, s.makefile("rb") as rfile:
            s.sendall(raw)
            self.assertCompletion(read_response(rfile, "POST"))
            self.assertEqual(rfile.read(), b"", "HTTP/1.0 without keep-alive: the server closes")
        # A stream to an HTTP/1.0 client: no chunked encoding (RFC 9112 6.1: a server MUST NOT
        # send Transfer-Encoding to a 1.0 request); the body ends with the connection.
        raw = build("POST", "/v1/chat/completions", json.dumps(chat(SERVER.model, stream=True)).encode(),
                    version="HTTP/1.0", host=False)
        with SERVER.connect(60 * ARGS.slow) as s, s.makefile("rb") as rfile:
            s.sendall(raw)
            version, status, _, headers = read_head(rfile)
            rest = rfile.read()
        self.assertEqual(status, 200)
        self.assertNotIn("chunked", headers.get("transfer-encoding", ""), (headers, rest[:200]))
        self.assertIn(b"data: [DONE]", rest)


    def test_an_http_1_0_keep_alive_stream_ends_with_the_connection(self):
        # A stream to an HTTP/1.0 client has no length and no chunks: only the closed
        # connection ends it, whatever keep-alive the client asked for. The server kept such a
        # connection open for its next request, so the client could not tell where the stream
        # ended, and a request it sent next was answered inside the same body.
        raw = build("POST", "/v1/chat/completions", json.dumps(chat(SERVER.model, stream=True)).encode(),
                    {"Connection": "Keep-Alive"}, version="HTTP/1.0", host=False)
        with SERVER.connect(60 * ARGS.slow) as s, s.makefile("rb") as rfile:
            s.sendall(raw)
            version, status, _, headers = read_head(rfile)
            self.assertEqual(status, 200)
            body = b""
            while b"data: [DONE]\n\n" not in body:
                piece = rfile.read1(65536)
                self.assertTrue(piece, f"closed before [DONE]: {body[-300:]!r}")
                body += piece
            try:
                s.sendall(b"GET /health HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            except OSError:
                pass  # the server may have closed already
            try:
                rest = rfile.read()
            except ConnectionError:
                rest = b""
        self.assertEqual(rest, b"", "the stream's body must end with the connection, not carry the next answer")
        self.assertEqual(headers.get("connection", "").lower(), "close", headers)


class MisbehavingClients(RawHttpCase):
    def test_slowloris_clients_do_not_hold_the_server(self):
        # 20 clients send their headers one byte a second; meanwhile another client's /health
        # and a chat completion must be answered at once.
        n = 20
        header = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slowloris\r\nX-Padding: " + b"a" * 64 + b"\r\n"
        socks = [SERVER.connect(10) for _ in range(n)]
        stop = threading.Event()

        def drip():
            for byte in header:
                for s in socks:
                    try:
                        s.send(bytes([byte]))
                    except OSError:
                        pass
                if stop.wait(1.0):
                    return

        dripper = threading.Thread(target=drip)
        dripper.start()
        try:
            time.sleep(2.5)
            timings = {}
            for name, raw, method in [("health", build("GET", "/health", headers={"Connection": "close"}), "GET"),
                                      ("chat", build("POST", "/v1/chat/completions",
                                                     json.dumps(chat(SERVER.model)).encode(),
                                                     {"Connection": "close"}), "POST")]:
                start = time.monotonic()
                try:
                    r = exchange(SERVER, raw, method, timeout=8 if name == "health" else 8 * ARGS.slow)
                    timings[name] = (r.status, round(time.monotonic() - start, 2))
                except socket.timeout:
                    timings[name] = ("no answer", round(time.monotonic() - start, 2))
            self.assertEqual(timings["health"][0], 200, f"with {n} slowloris clients open: {timings}")
            self.assertLess(timings["health"][1], 2 * ARGS.slow, timings)
            self.assertEqual(timings["chat"][0], 200, f"with {n} slowloris clients open: {timings}")
        finally:
            stop.set()
            dripper.join()
            for s in socks:
                s.close()
        # Once they are gone, the server answers again at once.
        self.assertEqual(request(SERVER, "GET", "/health", timeout=30 * ARGS.slow).status, 200)

    def wait_in_flight_zero(self, bound):
        deadline = time.monotonic() + bound
        seen = None
        while time.monotonic() < deadline:
            seen = metrics(SERVER).get("powerhouse_requests_in_flight")
            if seen == 0:
                return time.monotonic() - (deadline - bound)
            time.sleep(0.2)
        self.fail(f"powerhouse_requests_in_flight is still {seen} {bound:.0f} s after the clients left")

    def test_clients_vanishing_mid_stream_cancel_their_generations(self):
        self.wait_in_flight_zero(30 * ARGS.slow)
        before = metrics(SERVER)
        prompts = [f"Tell me a long story about the number {i}." for i in range(8)]

        def start_and_vanish(prompt):
            s = SERVER.connect(60 * ARGS.slow)
            s.sendall(build("POST", "/v1/chat/completions",
                            json.dumps(chat(SERVER.model, prompt, max_tokens=200, stream=True)).encode()))
            rfile = s.makefile("rb")
            _, status, _, headers = read_head(rfile)
            first = None
            for data in sse_events(rfile, headers):
                first = json.loads(data)
                if first["choices"][0]["delta"].get("content"):
                    break  # the first chunk with text: a token was generated
            s.shutdown(socket.SHUT_RDWR)
            rfile.close()
            s.close()
            return status, first

        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(start_and_vanish, prompts))
        for status, first in results:
            self.assertEqual(status, 200)
            self.assertIsNotNone(first)
        took = self.wait_in_flight_zero(5 * ARGS.slow)
        after = metrics(SERVER)
        generated = after["powerhouse_generated_tokens_total"] - before["powerhouse_generated_tokens_total"]
        # Cancelled generations are not counted as finished, or at least stopped far short of 8 x 200.
        self.assertLess(generated, 8 * 200 / 2, f"{generated} tokens generated for 8 cancelled streams")
        start = time.monotonic()
        self.assertCompletion(post(SERVER, chat(SERVER.model, "Hello", max_tokens=4), timeout=30 * ARGS.slow))
        print(f"\n  in flight back to 0 {took:.1f} s after the clients left; a new request took "
              f"{time.monotonic() - start:.1f} s", file=sys.stderr)

    def test_more_streams_than_http_workers(self):
        # The engine takes --parallel 8 at once and the server queues up to 64 more (429
        # past that): 12 streams must all get their response started (the role chunk comes
        # before any token) and /health must answer while they run.
        self.wait_in_flight_zero(30 * ARGS.slow)
        socks, started = [], {}
        try:
            for i in range(12):
                s = SERVER.connect(30 * ARGS.slow)
                s.sendall(build("POST", "/v1/chat/completions", json.dumps(chat(
                    SERVER.model, f"Tell me a long story about a dragon{'!' * i}", max_tokens=300, stream=True)).encode()))
                socks.append(s)
            t0 = time.monotonic()
            for i, s in enumerate(socks):
                s.settimeout(max(0.1, t0 + 5 * ARGS.slow - time.monotonic()))
                try:
                    if s.recv(1):
                        started[i] = round(time.monotonic() - t0, 2)
                except socket.timeout:
                    pass
            start = time.monotonic()
            try:
                health = request(SERVER, "GET", "/health", timeout=5 * ARGS.slow).status
            except socket.timeout:
                health = "no answer"
            health_s = round(time.monotonic() - start, 2)
        finally:
            for s in socks:
                s.close()
        self.assertEqual(len(started), 12, f"only {len(started)} of 12 streams started within "
                                           f"{5 * ARGS.slow:.0f} s: {started}")
        self.assertEqual(health, 200, f"/health with 12 streams open: {health} after {health_s} s")
        self.wait_in_flight_zero(10 * ARGS.slow)

    def test_vanishing_non_streaming_clients_cancel_their_generations(self):
        self.wait_in_flight_zero(30 * ARGS.slow)
        socks = []
        for i in range(4):  # each answer is 600 tokens long if it is not cancelled
            s = SERVER.connect(10)
            s.sendall(build("POST", "/v1/chat/completions", json.dumps(chat(
                SERVER.model, f"Tell me a long story about a dragon{'!' * i}", max_tokens=600)).encode()))
            socks.append(s)
        time.sleep(1.0 * ARGS.slow)
        for s in socks:
            s.shutdown(socket.SHUT_RDWR)
            s.close()
        # The answers would take far longer than this bound if they were generated to the end.
        self.wait_in_flight_zero(5 * ARGS.slow)


class IoTimeouts(RawHttpCase):
    """The clients of STALLED, started in setUpModule: the server must drop each within its
    I/O timeout (IO_TIMEOUT) plus a margin."""

    def test_stalled_clients_are_dropped(self):
        results = {}
        for client in STALLED_CLIENTS:
            client.join(timeout=max(0.0, client.started + IO_TIMEOUT + 20 - time.monotonic()))
            results[client.name] = client.outcome
        for name, outcome in results.items():
            with self.subTest(name):
                self.assertIsNotNone(outcome, f"{name}: still connected {IO_TIMEOUT + 20} s later")
                what, seconds = outcome
                self.assertLess(seconds, IO_TIMEOUT + 15, (name, outcome))
                self.assertIn(what, ("closed", "reset", 400, 408, 413), (name, outcome))
        print(f"\n  stalled clients: {results}", file=sys.stderr)
        self.assertEqual(request(STALLED, "GET", "/health", timeout=10).status, 200)


class StalledClient(threading.Thread):
    """Connects, sends `raw`, then nothing; records how the server ends the connection and when."""

    def __init__(self, name, raw):
        super().__init__(name=name, daemon=True)
        self.raw, self.outcome = raw, None
        self.sock = STALLED.connect(IO_TIMEOUT + 25)
        self.started = time.monotonic()

    def run(self):
        try:
            if self.raw:
                self.sock.sendall(self.raw)
            data = self.sock.recv(65536)
            took = round(time.monotonic() - self.started, 1)
            if not data:
                self.outcome = ("closed", took)
            else:
                self.outcome = (int(data.split(b" ", 2)[1]), took)
        except ConnectionResetError:
            self.outcome = ("reset", round(time.monotonic() - self.started, 1))
        except socket.timeout:
            self.outcome = None
        finally:
            self.sock.close()


def setUpModule():
    global SERVER, STALLED
    SERVER = Server("--parallel", "8")
    STALLED = Server("--parallel", "1", "--io-timeout", str(IO_TIMEOUT))
    body = json.dumps(chat(STALLED.model)).encode()
    head = build("POST", "/v1/chat/completions", body)
    for name, raw in [("connects and sends nothing", b""),
                      ("half a request line", b"POST /v1/chat/comp"),
                      ("headers without their end", head[:head.index(b"\r\n\r\n") + 2]),
                      ("Content-Length past the bytes sent", head[:-10]),
                      ("100 MiB declared, a small body sent",
                       head.replace(b"Content-Length: %d" % len(body), b"Content-Length: %d" % (100 << 20)))]:
        client = StalledClient(name, raw)
        client.start()
        STALLED_CLIENTS.append(client)


def tearDownModule():
    errors = [f"the corpus's server died: {c}" for c in CRASHES]
    for server in (SERVER, STALLED):
        if server is None:
            continue
        try:
            if not server.alive():
                errors.append(f"serve died with {server.proc.returncode}: {''.join(server.stderr)[-2000:]}")
                continue
            r = post(server, chat(server.model, "What is the capital of France?", max_tokens=8),
                     timeout=60 * ARGS.slow)
            if r.status != 200 or not r.json()["choices"][0]["message"]["content"]:
                errors.append(f"after the corpus, a chat completion got {r!r}")
            if not server.alive():
                errors.append("serve died")
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(f"after the corpus, a chat completion failed: {e!r}")
        finally:
            status = server.stop()
            if status != 0:
                errors.append(f"serve exited with {status} on SIGTERM: {''.join(server.stderr)[-2000:]}")
    if errors:
        raise AssertionError("\n".join(errors))


def load_tests(loader, standard_tests, pattern):
    # IoTimeouts last: it waits for the stalled clients, which the corpus runs beside.
    suite = unittest.TestSuite()
    for case in (MalformedJson, WrongTypes, Routing, Framing, MisbehavingClients, IoTimeouts):
        suite.addTests(loader.loadTestsFromTestCase(case))
    return suite


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--model")
    parser.add_argument("--slow", type=float, default=1.0)
    args, rest = parser.parse_known_args()
    ARGS.cli, ARGS.model, ARGS.slow = args.cli, args.model, args.slow
    if not ARGS.model:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        ARGS.model = os.environ.get("POWERHOUSE_TEST_MODEL") or os.path.join(
            cache, "powerhouse", "test-models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    unittest.main(argv=[sys.argv[0], "-v", *rest])
