#!/usr/bin/env python3
"""`powerhouse-cli serve` beyond plain chat, driven by the official `openai` package:
log-probabilities (chat and legacy completions), tools (the model's calls come back as
`tool_calls`; "required" and a named function force a call whose arguments match the
function's schema), response_format json_object and json_schema (checked with the
`jsonschema` package, a validator this project did not write), a reasoning model's thinking
as `reasoning_content` (streamed before the content), /metrics with GPU
telemetry (simulated GPUs, labelled so), CORS, and SIGTERM letting a stream finish.

Usage: openai_features_test.py --cli PATH/powerhouse-cli [--model MODEL.gguf]
"""
import json
import math
import os
import pathlib
import signal
import subprocess
import threading
import time
import unittest
import urllib.error
import urllib.request

import jsonschema
import openai

from serve_harness import ARGS, Server, ServedTestCase, ask, main
from serve_process import start_serve

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 30},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time now in a time zone.",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}},
                       "required": ["zone"]},
    },
}
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "colour": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
    },
    "required": ["name", "age", "colour", "tags"],
    "additionalProperties": False,
}


class Features(ServedTestCase):
    SERVE_ARGS = ("--parallel", "4")

    def chat(self, messages, **kw):
        kw.setdefault("max_tokens", 8)
        kw.setdefault("temperature", 0)
        return self.api.chat.completions.create(model=self.server.model, messages=messages, **kw)

    # ---- logit_bias ----

    def token_id(self, piece):
        out = subprocess.run([ARGS.cli, "tokenize", "-m", ARGS.model, "--no-bos"], input=json.dumps({"text": piece}),
                             capture_output=True, text=True, check=True).stdout
        ids = json.loads(out)["ids"]
        self.assertEqual(len(ids), 1, f"{piece!r} is one token of this model")
        return ids[0]

    def test_logit_bias_bans_and_forces_tokens(self):
        # Banned: the greedy answer's first token gives way to the runner-up of the same step.
        first = self.chat(ask("Name a fruit."), max_tokens=1, logprobs=True, top_logprobs=2)
        top = first.choices[0].logprobs.content[0].top_logprobs
        banned = self.token_id(top[0].token)
        again = self.chat(ask("Name a fruit."), max_tokens=1, logit_bias={str(banned): -100})
        self.assertEqual(again.choices[0].message.content, top[1].token)
        # Forced: +100 makes one token the whole answer, streamed or not (a chat's content is
        # read as an answer, its ends trimmed; legacy completions keep the text as it is).
        banana = self.token_id(" banana")
        forced = self.chat(ask("Name a colour."), max_tokens=3, logit_bias={str(banana): 100})
        self.assertEqual(forced.choices[0].message.content, "banana banana banana")
        self.assertEqual(forced.usage.completion_tokens, 3)
        streamed = "".join(c.choices[0].delta.content or "" for c in self.chat(
            ask("Name a colour."), max_tokens=3, logit_bias={str(banana): 100}, stream=True) if c.choices)
        self.assertEqual(streamed, "banana banana banana")
        # Sampled (temperature 1) too, and on the legacy completions endpoint.
        hot = self.chat(ask("Name a colour."), max_tokens=2, temperature=1, seed=3, logit_bias={str(banana): 100})
        self.assertEqual(hot.choices[0].message.content, "banana banana")
        legacy = self.api.completions.create(model=self.server.model, prompt="Once upon", max_tokens=2, temperature=0,
                                             logit_bias={str(banana): 100})
        self.assertEqual(legacy.choices[0].text, " banana banana")
        # Ids past the vocabulary, and biases outside [-100, 100], are the client's mistake.
        for bad in [{"49152": 1}, {str(banana): 100.5}, {"x": 1}, {"-1": 1}]:
            with self.subTest(bad=bad), self.assertRaises(openai.BadRequestError) as raised:
                self.chat(ask("hi"), logit_bias=bad)
            self.assertIn("logit_bias", str(raised.exception))

    # ---- logprobs ----

    def test_logprobs_of_a_greedy_answer(self):
        r = self.chat(ask("Name a fruit."), logprobs=True, top_logprobs=3)
        content = r.choices[0].logprobs.content
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(len(content), r.usage.completion_tokens)
        self.assertEqual(b"".join(bytes(t.bytes) for t in content).decode(), r.choices[0].message.content)
        for t in content:
            self.assertLessEqual(t.logprob, 0.0)
            self.assertEqual(len(t.top_logprobs), 3)
            self.assertEqual(t.top_logprobs[0].token, t.token, "greedy picks the likeliest")
            self.assertAlmostEqual(t.top_logprobs[0].logprob, t.logprob, places=5)
            ranked = [a.logprob for a in t.top_logprobs]
            self.assertEqual(ranked, sorted(ranked, reverse=True))
        # Streamed: the same tokens and values, spread over the chunks.
        streamed = []
        for chunk in self.chat(ask("Name a fruit."), logprobs=True, top_logprobs=3, stream=True):
            for c in chunk.choices:
                if c.logprobs and c.logprobs.content:
                    streamed.extend(c.logprobs.content)
        self.assertEqual([(t.token, round(t.logprob, 4)) for t in streamed],
                         [(t.token, round(t.logprob, 4)) for t in content])
        # Without logprobs there are none; top_logprobs alone or past 20 is refused.
        self.assertIsNone(self.chat(ask("Name a fruit.")).choices[0].logprobs)
        for bad in [dict(top_logprobs=2), dict(logprobs=True, top_logprobs=21), dict(logprobs="yes")]:
            with self.subTest(bad=bad), self.assertRaises(openai.BadRequestError):
                self.chat(ask("hi"), **bad)

    # ---- speculative decoding by prompt lookup (llama.cpp's "speculative.n_max") ----

    def test_lookup_decoding_gives_the_same_answer(self):
        # A prompt whose answer repeats it: the guesses come true, and the answer is the one
        # written without them, streamed or not, in chat and legacy completions.
        text = "one two three four five six seven eight nine ten. one two three four five six seven eight nine ten. one"
        plain = self.api.completions.create(model=self.server.model, prompt=text, max_tokens=30, temperature=0)
        guessed = self.api.completions.create(model=self.server.model, prompt=text, max_tokens=30, temperature=0,
                                              extra_body={"speculative.n_max": 8})
        self.assertEqual(guessed.choices[0].text, plain.choices[0].text)
        self.assertEqual(guessed.usage.completion_tokens, plain.usage.completion_tokens)
        self.assertIsNone(plain.usage.completion_tokens_details, "no guesses, no counts")
        details = guessed.usage.completion_tokens_details
        self.assertGreater(details.accepted_prediction_tokens, 5, "the count repeats the prompt")
        self.assertGreaterEqual(details.rejected_prediction_tokens, 0)
        streamed = "".join(c.choices[0].text for c in self.api.completions.create(
            model=self.server.model, prompt=text, max_tokens=30, temperature=0, stream=True,
            extra_body={"speculative.n_max": 8}) if c.choices)
        self.assertEqual(streamed, plain.choices[0].text)
        chat_plain = self.chat(ask(text), max_tokens=30)
        chat_guessed = self.chat(ask(text), max_tokens=30, extra_body={"speculative.n_max": 8})
        self.assertEqual(chat_guessed.choices[0].message.content, chat_plain.choices[0].message.content)
        # /metrics counts them (from the engine's last report, at most half a second old).
        deadline = time.time() + 10
        while True:
            with urllib.request.urlopen(self.server.base + "/metrics", timeout=30) as r:
                text = r.read().decode()
            drafted = [line for line in text.splitlines()
                       if line.startswith('powerhouse_speculative_tokens_total{kind="drafted"}')]
            if drafted and float(drafted[0].split()[-1]) > 0 or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertIn("# TYPE powerhouse_speculative_tokens_total counter", text)
        self.assertTrue(drafted and float(drafted[0].split()[-1]) >= details.accepted_prediction_tokens, text)

    def test_a_predicted_output_is_checked_and_counted(self):
        # OpenAI's predicted outputs: the text the answer is expected to be. Given the answer
        # itself, nearly every token comes as a guess; given something else, the answer is the
        # same and the guesses are rejected.
        question = ask("Write the numbers from one to twenty in words.")
        plain = self.chat(question, max_tokens=40)
        right = self.chat(question, max_tokens=40,
                          prediction={"type": "content", "content": plain.choices[0].message.content})
        self.assertEqual(right.choices[0].message.content, plain.choices[0].message.content)
        details = right.usage.completion_tokens_details
        self.assertGreater(details.accepted_prediction_tokens, right.usage.completion_tokens // 2)
        wrong = self.chat(question, max_tokens=40,
                          prediction={"type": "content", "content": [{"type": "text", "text": "The sky is blue. " * 5}]})
        self.assertEqual(wrong.choices[0].message.content, plain.choices[0].message.content)
        for bad in ["text", {"type": "content"}, {"type": "file", "content": "x"},
                    {"type": "content", "content": [{"type": "image_url"}]}, {"type": "content", "content": 5}]:
            with self.subTest(bad=bad), self.assertRaises(openai.BadRequestError) as raised:
                self.chat(ask("hi"), prediction=bad)
            self.assertIn("prediction", str(raised.exception))

    # ---- embeddings ----

    def test_embeddings_equal_llama_cpps(self):
        # The test model names no pooling: mean, as llama.cpp's embeddings of the same texts
        # (tests/data/embeddings, scripts/fixtures/make_embedding_fixture.py).
        fixture = json.loads((DATA / "embeddings" / "smollm2_embeddings.json").read_text())
        cases = [c for c in fixture["cases"] if c["pooling"] == "mean"][:3]
        texts = [c["text"] for c in cases]

        def cosine(a, b):
            return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

        # The client asks for base64 unless told otherwise; float as asked.
        for encoding in [None, "float"]:
            with self.subTest(encoding=encoding):
                kw = {} if encoding is None else {"encoding_format": encoding}
                r = self.api.embeddings.create(model=self.server.model, input=texts, **kw)
                self.assertEqual([d.index for d in r.data], [0, 1, 2])
                for d, c in zip(r.data, cases):
                    self.assertEqual(len(d.embedding), 576)
                    self.assertGreater(cosine(d.embedding, c["embedding"]), 0.998)
                self.assertEqual(r.usage.prompt_tokens, sum(len(c["prompt_ids"]) for c in cases))
        # One text, and one input given as token ids, the same vector.
        one = self.api.embeddings.create(model=self.server.model, input=texts[0], encoding_format="float")
        ids = self.api.embeddings.create(model=self.server.model, input=cases[0]["prompt_ids"], encoding_format="float")
        self.assertEqual(one.data[0].embedding, ids.data[0].embedding)
        for bad, param in [("", "input"), ([], "input"), ([1, "a"], "input"), ([[1], "a"], "input"),
                           ([10**9], "input")]:
            with self.subTest(bad=bad), self.assertRaises(openai.BadRequestError) as raised:
                self.api.embeddings.create(model=self.server.model, input=bad, encoding_format="float")
            self.assertIn(param, str(raised.exception))
        with self.assertRaises(openai.BadRequestError) as raised:
            self.api.embeddings.create(model=self.server.model, input="x", dimensions=64)
        self.assertIn("dimensions", str(raised.exception))

    def test_legacy_completion_logprobs(self):
        r = self.api.completions.create(model=self.server.model, prompt="The sky is", max_tokens=5, temperature=0,
                                        logprobs=2)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 5)
        self.assertEqual(len(lp.token_logprobs), 5)
        self.assertEqual(len(lp.top_logprobs), 5)
        self.assertEqual(lp.text_offset[0], 0)
        for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            self.assertLessEqual(len(top), 2)
            self.assertAlmostEqual(max(top.values()), value, places=5)
            self.assertIn(token, top)

    # ---- response_format ----

    def test_json_object_answers_parse(self):
        for seed in (1, 2):
            r = self.chat(ask("Describe a cat as a JSON object."), max_tokens=200, temperature=0.7, seed=seed,
                          response_format={"type": "json_object"})
            text = r.choices[0].message.content
            self.assertEqual(r.choices[0].finish_reason, "stop", text)
            self.assertIsInstance(json.loads(text), dict, text)

    def test_json_schema_answers_match_the_schema(self):
        fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
        for seed in (3, 4, 5):
            r = self.chat(ask("Invent a person."), max_tokens=200, temperature=1.0, seed=seed, response_format=fmt)
            text = r.choices[0].message.content
            self.assertEqual(r.choices[0].finish_reason, "stop", text)
            jsonschema.validate(json.loads(text), PERSON)
        pieces = [c.choices[0].delta.content or "" for c in self.chat(
            ask("Invent a person."), max_tokens=200, temperature=0, response_format=fmt, stream=True) if c.choices]
        jsonschema.validate(json.loads("".join(pieces)), PERSON)
        # What cannot be enforced is refused, naming the keyword.
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat(ask("hi"), response_format={"type": "json_schema", "json_schema": {
                "name": "x", "schema": {"type": "string", "pattern": "^a+$"}}})
        self.assertIn("pattern", str(e.exception))
        for bad in [{"type": "xml"}, {"type": "json_schema"}, "json"]:
            with self.subTest(bad=bad), self.assertRaises(openai.BadRequestError):
                self.chat(ask("hi"), response_format=bad)

    # ---- tools ----

    def check_weather_call(self, call):
        self.assertEqual(call.type, "function")
        self.assertEqual(call.function.name, "get_weather")
        self.assertTrue(call.id)
        jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])

    def test_a_required_tool_call_comes_back_as_tool_calls(self):
        r = self.chat(ask("What is the weather in Paris?"), max_tokens=120, tools=[WEATHER], tool_choice="required")
        choice = r.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
        self.assertEqual(len(choice.message.tool_calls), 1)
        self.check_weather_call(choice.message.tool_calls[0])
        self.assertFalse(choice.message.content)
        # Streamed: the call arrives as tool_calls deltas, and no markup as content.
        content, calls, finish = "", {}, None
        for chunk in self.chat(ask("What is the weather in Paris?"), max_tokens=120, tools=[WEATHER],
                               tool_choice="required", stream=True):
            for c in chunk.choices:
                content += c.delta.content or ""
                for d in c.delta.tool_calls or []:
                    entry = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                    entry["id"] += d.id or ""
                    entry["name"] += (d.function.name or "") if d.function else ""
                    entry["arguments"] += (d.function.arguments or "") if d.function else ""
                finish = c.finish_reason or finish
        self.assertEqual(finish, "tool_calls")
        self.assertEqual(content.strip(), "")
        self.assertEqual(len(calls), 1)
        self.assertEqual(calls[0]["name"], "get_weather")
        self.assertEqual(json.loads(calls[0]["arguments"]), json.loads(choice.message.tool_calls[0].function.arguments))

    def test_a_named_tool_choice_calls_that_function(self):
        r = self.chat(ask("What time is it in Tokyo?"), max_tokens=120, tools=[WEATHER, TIME],
                      tool_choice={"type": "function", "function": {"name": "get_time"}})
        calls = r.choices[0].message.tool_calls
        self.assertEqual([c.function.name for c in calls], ["get_time"])
        jsonschema.validate(json.loads(calls[0].function.arguments), TIME["function"]["parameters"])

    def test_a_tool_result_continues_the_conversation(self):
        first = self.chat(ask("What is the weather in Paris?"), max_tokens=120, tools=[WEATHER],
                          tool_choice="required").choices[0].message
        call = first.tool_calls[0]
        messages = ask("What is the weather in Paris?") + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 18, "sky": "clear"}'},
        ]
        r = self.chat(messages, max_tokens=16, tools=[WEATHER])
        self.assertIn(r.choices[0].finish_reason, ("stop", "length", "tool_calls"))
        self.assertGreater(r.usage.prompt_tokens, 40, "the call and its result are in the prompt")
        auto = self.chat(ask("Hello!"), max_tokens=16, tools=[WEATHER], tool_choice="auto")
        self.assertIn(auto.choices[0].finish_reason, ("stop", "length", "tool_calls"))

    def test_bad_tool_requests_are_refused(self):
        for bad in [dict(tool_choice="required"),
                    dict(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}),
                    dict(tools=[{"type": "function", "function": {"name": ""}}]),
                    dict(tools=[{"type": "retrieval"}]),
                    dict(tools=[WEATHER], tool_choice="sometimes"),
                    dict(tools=[WEATHER], tool_choice="required", response_format={"type": "json_object"})]:
            with self.subTest(bad=bad), self.assertRaises(openai.BadRequestError):
                self.chat(ask("hi"), **bad)
        with self.assertRaises(openai.BadRequestError):
            self.chat([{"role": "tool", "content": "18 degrees"}])  # no tool_call_id

    # ---- reasoning ----

    def test_reasoning_comes_back_apart_from_the_content(self):
        # The test model does not think: llama.cpp's `grammar` field makes it write what a
        # reasoning model writes (Qwen3, DeepSeek-R1), and the server reads it as theirs.
        grammar = 'root ::= "<think>The user asks for a capital. It is Paris.</think>\\n\\nParis."'
        thought = "The user asks for a capital. It is Paris."
        r = self.chat(ask("What is the capital of France?"), max_tokens=60, extra_body={"grammar": grammar})
        message = r.choices[0].message
        self.assertEqual(message.content, "Paris.")
        self.assertEqual((message.model_extra or {}).get("reasoning_content"), thought)
        # Streamed: the reasoning as it is written, then the content.
        kinds, reasoning, content = [], "", ""
        for chunk in self.chat(ask("What is the capital of France?"), max_tokens=60, stream=True,
                               extra_body={"grammar": grammar}):
            for c in chunk.choices:
                piece = (c.delta.model_extra or {}).get("reasoning_content")
                if piece:
                    reasoning += piece
                    kinds.append("reasoning")
                if c.delta.content:
                    content += c.delta.content
                    kinds.append("content")
        self.assertEqual(reasoning, thought)
        self.assertEqual(content, "Paris.")
        self.assertGreater(kinds.index("content"), 3, kinds)
        self.assertNotIn("reasoning", kinds[kinds.index("content"):], kinds)
        # A grammar that does not parse is the client's mistake.
        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(ask("hi"), extra_body={"grammar": "root ::= ("})
        self.assertIn("grammar", str(raised.exception))

    # ---- metrics ----

    def test_metrics_have_the_generation_rate(self):
        self.chat(ask("Count to ten."), max_tokens=24)
        with urllib.request.urlopen(self.server.base + "/metrics", timeout=30) as r:
            text = r.read().decode()
        self.assertIn("# TYPE powerhouse_generation_tokens_per_second gauge", text)
        self.assertIn("powerhouse_sequences_waiting ", text)


class EmbeddingModel(unittest.TestCase):
    """A BERT encoder (a synthetic bge-small): /v1/embeddings answers with its CLS vectors, as
    `powerhouse-cli embed` gives them; asked for text, the server says it is an embedding
    model, with a 400, streamed or not."""

    def test_an_embedding_model_embeds_and_refuses_to_chat(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bge.gguf")
            subprocess.run([ARGS.cli, "synth", "--like", "bge-small", "--layers", "2", "--type", "q8_0", "-o", path],
                           check=True, capture_output=True)
            proc, model, base = start_serve(ARGS.cli, path)
            api = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=120)
            try:
                texts = ["Paris is the capital of France.", "The quick brown fox."]
                got = api.embeddings.create(model=model, input=texts, encoding_format="float")
                self.assertEqual([len(d.embedding) for d in got.data], [384, 384])
                embed = subprocess.run([ARGS.cli, "embed", "-m", path, "-t", "2", "-p", texts[0], "-p", texts[1]],
                                       check=True, capture_output=True, text=True).stdout.splitlines()
                for d, line in zip(got.data, embed):
                    cli = json.loads(line)["embedding"]
                    dot = sum(a * b for a, b in zip(d.embedding, cli))
                    self.assertGreater(dot, 0.99999, "the server's vector is embed's")
                self.assertEqual(got.usage.prompt_tokens, sum(json.loads(l)["tokens"] for l in embed))
                for stream in (False, True):
                    with self.subTest(stream=stream), self.assertRaises(openai.BadRequestError) as refused:
                        api.chat.completions.create(model=model, messages=ask("hi"), stream=stream)
                    self.assertIn("is an embedding model", str(refused.exception))
            finally:
                api.close()
                proc.terminate()
                self.assertEqual(proc.wait(timeout=30), 0)
                proc.stdout.close()
                proc.stderr.close()


class Telemetry(unittest.TestCase):
    def test_metrics_carry_each_gpus_telemetry(self):
        os.environ["POWERHOUSE_SIMULATE_GPUS"] = "RTX 4090:24;A100:80"
        try:
            server = Server()
        finally:
            del os.environ["POWERHOUSE_SIMULATE_GPUS"]
        try:
            time.sleep(1.5)  # a sample or two
            with urllib.request.urlopen(server.base + "/metrics", timeout=30) as r:
                text = r.read().decode()
            for name in ["powerhouse_gpu_utilization_ratio", "powerhouse_gpu_temperature_celsius",
                         "powerhouse_gpu_memory_used_bytes", "powerhouse_gpu_memory_total_bytes",
                         "powerhouse_gpu_power_watts"]:
                lines = [l for l in text.splitlines() if l.startswith(name + "{")]
                self.assertEqual(len(lines), 2, name)
                self.assertTrue(all('simulated="true"' in l for l in lines), lines)
            self.assertIn('name="RTX 4090"', text)
            total = [l for l in text.splitlines() if l.startswith("powerhouse_gpu_memory_total_bytes{") and "A100" in l]
            self.assertEqual(float(total[0].rsplit(" ", 1)[1]), 80 * 2**30)
        finally:
            self.assertEqual(server.close(), 0)


class Cors(unittest.TestCase):
    def preflight(self, server, origin):
        req = urllib.request.Request(server.base + "/v1/chat/completions", method="OPTIONS", headers={
            "Origin": origin, "Access-Control-Request-Method": "POST"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers.get("Access-Control-Allow-Origin")
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Access-Control-Allow-Origin")

    def test_cors_is_off_unless_origins_are_listed(self):
        plain = Server()
        try:
            status, allow = self.preflight(plain, "http://evil.test")
            self.assertIsNone(allow)
        finally:
            self.assertEqual(plain.close(), 0)
        listed = Server("--cors-origin", "http://app.test")
        try:
            self.assertEqual(self.preflight(listed, "http://app.test"), (204, "http://app.test"))
            status, allow = self.preflight(listed, "http://evil.test")
            self.assertIsNone(allow)
            self.assertEqual(status, 403)
            req = urllib.request.Request(listed.base + "/v1/models", headers={"Origin": "http://app.test"})
            with urllib.request.urlopen(req, timeout=30) as r:
                self.assertEqual(r.headers.get("Access-Control-Allow-Origin"), "http://app.test")
        finally:
            self.assertEqual(listed.close(), 0)


class Ports(unittest.TestCase):
    def test_a_port_in_use_is_refused_not_shared(self):
        first = Server()
        try:
            port = first.base.rsplit(":", 1)[1]
            proc = subprocess.run([ARGS.cli, "serve", "-m", ARGS.model, "--port", port, "-t", "1"],
                                  capture_output=True, text=True, timeout=120)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("in use", proc.stderr)
        finally:
            self.assertEqual(first.close(), 0)


class GracefulStop(unittest.TestCase):
    def test_sigterm_lets_a_stream_in_flight_finish(self):
        server = Server("--shutdown-grace", "60")
        out = {}

        def stream():
            with server.client() as c:
                finish, text = None, ""
                for chunk in c.chat.completions.create(model=server.model, messages=ask("Tell me a story."),
                                                       max_tokens=40, temperature=0, stream=True):
                    for ch in chunk.choices:
                        text += ch.delta.content or ""
                        finish = ch.finish_reason or finish
                out["finish"], out["text"] = finish, text

        t = threading.Thread(target=stream)
        t.start()
        time.sleep(1.0)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        with self.assertRaises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(server.base + "/health", timeout=5)
        t.join(timeout=120)
        self.assertEqual(out.get("finish"), "length", "the stream in flight ran to its end")
        self.assertEqual(server.proc.wait(timeout=60), 0)
        server.proc.stdout.close()
        server.proc.stderr.close()


if __name__ == "__main__":
    main()
