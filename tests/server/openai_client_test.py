#!/usr/bin/env python3
"""`powerhouse-cli serve` driven by the official `openai` Python package (PyPI), a client
this project did not write: models, chat completions streamed and not, usage, stop, seeds,
many clients at once (each stream equal to the same request alone), API keys and the error
of every bad request.

Usage: openai_client_test.py --cli PATH/powerhouse-cli [--model MODEL.gguf]
The model: --model, else $POWERHOUSE_TEST_MODEL, else the one scripts/fetch-test-model
puts in the cache. The `openai` package comes from $PYTHONPATH (scripts/test installs it
into build/pydeps).
"""
import concurrent.futures
import json
import os
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

import openai

from serve_harness import ARGS, Server, ServedTestCase, ask, main

class OpenAiClient(ServedTestCase):
    SERVE_ARGS = ("--parallel", "8")

    def greedy(self, text, n=24, **kw):
        return self.api.chat.completions.create(model=self.server.model, messages=ask(text), max_tokens=n,
                                                temperature=0, **kw)

    def stream_text(self, text, n=24, **kw):
        pieces, usage, finish = [], None, None
        for chunk in self.api.chat.completions.create(model=self.server.model, messages=ask(text), max_tokens=n,
                                                      temperature=0, stream=True, **kw):
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices:
                if c.delta.content:
                    pieces.append(c.delta.content)
                if c.finish_reason:
                    finish = c.finish_reason
        return "".join(pieces), usage, finish

    def test_models_lists_the_served_model(self):
        ids = [m.id for m in self.api.models.list()]
        self.assertEqual(ids, [self.server.model])

    def test_a_model_is_retrieved_by_its_id(self):
        # GET /v1/models/{model} (OpenAI's "retrieve model"), which clients call to check that a
        # model exists; it was a 404 "no such endpoint" for the served model too.
        m = self.api.models.retrieve(self.server.model)
        self.assertEqual((m.id, m.object, m.owned_by), (self.server.model, "model", "powerhouse"))
        with self.assertRaises(openai.NotFoundError) as e:
            self.api.models.retrieve("no-such-model")
        self.assertEqual(e.exception.code, "model_not_found")
        self.assertIn("no-such-model", e.exception.message)
        self.assertIn(self.server.model, e.exception.message)

    def test_a_completion_with_its_usage(self):
        r = self.greedy("What is the capital of France?", n=8)
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.model, self.server.model)
        self.assertEqual(len(r.choices), 1)
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertTrue(r.choices[0].message.content)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 8)
        self.assertGreater(r.usage.prompt_tokens, 5)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)

    def test_a_stream_gives_the_same_text_and_usage(self):
        whole = self.greedy("Name three colours.", n=20)
        text, usage, finish = self.stream_text("Name three colours.", n=20, stream_options={"include_usage": True})
        self.assertEqual(text, whole.choices[0].message.content)
        self.assertEqual(finish, whole.choices[0].finish_reason)
        self.assertIsNotNone(usage)
        self.assertEqual(usage.completion_tokens, whole.usage.completion_tokens)
        self.assertEqual(usage.prompt_tokens, whole.usage.prompt_tokens)
        _, no_usage, _ = self.stream_text("Name three colours.", n=4)
        self.assertIsNone(no_usage)

    def test_a_stop_string_ends_the_answer_before_it(self):
        full = self.greedy("Count from one to twenty in words.", n=40).choices[0].message.content
        self.assertGreater(len(full), 8, full)
        stop = full[len(full) // 2:len(full) // 2 + 3]
        r = self.greedy("Count from one to twenty in words.", n=40, stop=[stop])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.choices[0].message.content, full[:full.index(stop)])

    def test_a_seed_reproduces_a_sampled_answer(self):
        def sample(seed):
            return self.api.chat.completions.create(model=self.server.model, messages=ask("Tell me a story."),
                                                    max_tokens=24, temperature=1.0, seed=seed).choices[0].message.content
        self.assertEqual(sample(7), sample(7))

    def test_many_clients_at_once_each_get_their_answer_alone(self):
        prompts = [f"Write a sentence about the number {i}." for i in range(8)]
        alone = [self.stream_text(p, n=16)[0] for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            together = list(pool.map(lambda p: self.stream_text(p, n=16)[0], prompts))
        self.assertEqual(together, alone)

    def test_a_client_that_goes_away_does_not_hold_the_server(self):
        stream = self.api.chat.completions.create(model=self.server.model, messages=ask("Tell me a long story."),
                                                  max_tokens=1500, temperature=0, stream=True)
        for i, _ in enumerate(stream):
            if i == 2:
                break
        stream.close()
        start = time.monotonic()
        self.greedy("Hello", n=4)
        self.assertLess(time.monotonic() - start, 60)

    def test_a_text_completion_reads_the_special_tokens_in_its_prompt(self):
        prompt = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
        tokens = subprocess.run([ARGS.cli, "tokenize", "-m", ARGS.model, "--special"],
                                input=json.dumps({"text": prompt}) + "\n", capture_output=True, text=True, check=True)
        n_prompt = len(json.loads(tokens.stdout)["ids"])
        r = self.api.completions.create(model=self.server.model, prompt=prompt, max_tokens=8, temperature=0)
        self.assertEqual(r.object, "text_completion")
        self.assertTrue(r.choices[0].text)
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
        self.assertEqual(r.usage.prompt_tokens, n_prompt, "the special tokens count as one token each")
        self.assertLessEqual(r.usage.completion_tokens, 8)
        self.assertGreater(r.usage.completion_tokens, 0)
        pieces = [c.choices[0].text for c in self.api.completions.create(
            model=self.server.model, prompt=prompt, max_tokens=8, temperature=0, stream=True) if c.choices]
        self.assertEqual("".join(pieces), r.choices[0].text)
        for bad in [dict(echo=True), dict(suffix="x"), dict(logprobs=9), dict(best_of=2)]:
            with self.subTest(bad=bad), self.assertRaises(openai.BadRequestError):
                self.api.completions.create(model=self.server.model, prompt=prompt, max_tokens=4, **bad)
        with self.assertRaises(openai.BadRequestError):
            self.api.completions.create(model=self.server.model, prompt=[1, 2, 3], max_tokens=4)

    def test_metrics_count_requests_tokens_and_kv_blocks(self):
        self.greedy("Hello there", n=5)
        with urllib.request.urlopen(self.server.base + "/metrics", timeout=30) as r:
            self.assertTrue(r.headers["Content-Type"].startswith("text/plain"))
            text = r.read().decode()
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        self.assertGreaterEqual(values['powerhouse_requests_total{endpoint="chat"}'], 1)
        self.assertGreaterEqual(values["powerhouse_generated_tokens_total"], 5)
        self.assertGreater(values["powerhouse_prompt_tokens_total"], 0)
        self.assertGreater(values['powerhouse_kv_blocks{state="total"}'], 0)
        self.assertIn("# TYPE powerhouse_requests_in_flight gauge", text)

    def test_a_prompt_past_the_context_is_a_400_streamed_or_not(self):
        # OpenAI refuses a prompt longer than the context with 400 context_length_exceeded,
        # before any stream starts. The server started the stream (200) and sent the error as
        # an event: the openai package then raised a bare APIError, not the BadRequestError
        # with the code that clients catch to shorten the conversation.
        long = "hello world " * 3000  # ~6000 tokens; the context is 2048
        for stream in (False, True):
            with self.subTest(stream=stream), self.assertRaises(openai.BadRequestError) as e:
                r = self.api.chat.completions.create(model=self.server.model, messages=ask(long), max_tokens=8,
                                                     stream=stream)
                if stream:
                    list(r)
            self.assertEqual(e.exception.code, "context_length_exceeded")
            self.assertIn("context", e.exception.message)
        with self.assertRaises(openai.BadRequestError) as e:
            list(self.api.completions.create(model=self.server.model, prompt=long, max_tokens=8, stream=True))
        self.assertEqual(e.exception.code, "context_length_exceeded")

    def test_bad_requests_get_openai_errors(self):
        m = self.server.model
        with self.assertRaises(openai.NotFoundError) as e:
            self.api.chat.completions.create(model="no-such-model", messages=ask("hi"))
        self.assertIn("no-such-model", str(e.exception))
        for bad in [dict(temperature=5), dict(max_tokens=0), dict(max_tokens=10**9), dict(n=2), dict(top_p=-1),
                    dict(stop=["a", "b", "c", "d", "e"]), dict(presence_penalty=3), dict(seed=1.5)]:
            with self.subTest(bad=bad), self.assertRaises(openai.BadRequestError):
                self.api.chat.completions.create(model=m, messages=ask("hi"), **bad)
        with self.assertRaises(openai.BadRequestError):
            self.api.chat.completions.create(model=m, messages=[])
        with self.assertRaises(openai.BadRequestError):
            self.api.chat.completions.create(model=m, messages=[{"role": "wizard", "content": "hi"}])
        # What the client library would not send.
        for body in [b"{not json", b"[1, 2]", b'{"model": 5, "messages": []}', b'{"model": "' + m.encode() +
                     b'", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
                     json.dumps({"model": m, "messages": ask("hi"), "max_tokens": "ten"}).encode(),
                     json.dumps({"model": m, "messages": ask("hi"), "stream": "yes"}).encode()]:
            status, err = self.server.post("/v1/chat/completions", body)
            self.assertEqual(status, 400, body)
            self.assertIn("message", err.get("error", {}), body)
        status, err = self.server.post("/v1/chat/completions", b" " * (9 << 20))
        self.assertEqual(status, 413)
        self.assertIn("too large", err["error"]["message"])
        status, err = self.server.post("/v1/nothing", b"{}")
        self.assertEqual(status, 404)


class Stopping(unittest.TestCase):
    def test_sigterm_ends_the_requests_in_flight_and_exits(self):
        server = Server()
        results = []

        def long_answer(stream):
            try:
                with server.client() as c:
                    r = c.chat.completions.create(model=server.model, messages=ask("Tell me a very long story."),
                                                  max_tokens=1800, temperature=0, stream=stream)
                    if stream:
                        for _ in r:
                            pass
                results.append("ended")
            except Exception as e:  # the connection may close under it: that is an end too
                results.append(type(e).__name__)

        threads = [threading.Thread(target=long_answer, args=(s,)) for s in (False, True)]
        for t in threads:
            t.start()
        time.sleep(2)
        start = time.monotonic()
        self.assertEqual(server.stop(), 0)
        self.assertLess(time.monotonic() - start, 20, "SIGTERM ends the generations within a bound")
        for t in threads:
            t.join(timeout=30)
        self.assertEqual(len(results), 2)
        server.proc.stdout.close()
        server.proc.stderr.close()


class ApiKeys(unittest.TestCase):
    def test_a_key_is_needed_when_given_and_a_public_address_needs_one(self):
        with tempfile.NamedTemporaryFile("w", suffix=".key", delete=False) as f:
            f.write("s3cret-key\n")
        try:
            server = Server("--api-key-file", f.name)
            try:
                with server.client("s3cret-key") as c:
                    self.assertEqual([m.id for m in c.models.list()], [server.model])
                for key in ["wrong", "s3cret-ke", "s3cret-key2"]:
                    with self.subTest(key=key), server.client(key) as c, self.assertRaises(openai.AuthenticationError):
                        c.models.list()
                status, err = server.post("/v1/chat/completions", b"{}")
                self.assertEqual(status, 401)
                self.assertNotIn("s3cret", json.dumps(err))
                # The scheme is case-insensitive (RFC 9110 11.1): "bearer KEY" is the same key.
                # A 401 says which scheme it wants (WWW-Authenticate, RFC 9110 11.6.1).
                for auth, status in [("bearer s3cret-key", 200), ("BEARER s3cret-key", 200),
                                     ("Bearer s3cret-key", 200), ("bearer wrong", 401), ("Basic czNjcmV0LWtleQ==", 401),
                                     ("s3cret-key", 401), ("Bearers3cret-key", 401)]:
                    with self.subTest(auth=auth):
                        req = urllib.request.Request(server.base + "/v1/models", headers={"Authorization": auth})
                        try:
                            with urllib.request.urlopen(req, timeout=30) as r:
                                got, challenge = r.status, None
                        except urllib.error.HTTPError as e:
                            got, challenge = e.code, e.headers.get("WWW-Authenticate")
                            e.close()
                        self.assertEqual(got, status)
                        if status == 401:
                            self.assertEqual(challenge, "Bearer")
            finally:
                self.assertEqual(server.stop(), 0)
            self.assertNotIn("s3cret", server.proc.stderr.read())
            server.proc.stdout.close()
            server.proc.stderr.close()
        finally:
            os.unlink(f.name)
        proc = subprocess.run([ARGS.cli, "serve", "-m", ARGS.model, "--host", "0.0.0.0", "--port", "0"],
                              capture_output=True, text=True, timeout=60)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("API key", proc.stderr)


if __name__ == "__main__":
    main()
