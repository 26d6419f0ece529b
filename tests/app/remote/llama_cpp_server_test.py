#!/usr/bin/env python3
"""powerhouse-cli's remote engine against a server this project did not write:
llama-cpp-python's (`python3 -m llama_cpp.server`) with the test model, on 127.0.0.1. Model
list, streamed answers (equal to the server's own non-streamed answer at temperature 0), stop
strings, a multi-turn chat, Ctrl+C on a streaming answer, its errors (no key, a wrong key,
a prompt longer than its context), and tool calls: with chat_format chatml-function-calling
and a tool_choice naming the function, it streams a call in pieces (the id and name repeated
in each), which --tools shows as the server's own non-streamed answer has it.

The package compiles llama.cpp for about 25 minutes on two cores, so it is optional: without
it this test says so and exits 77 (ctest's SKIP_RETURN_CODE). Its recorded stream
(tests/data/remote/llama_cpp_python_stream.sse) is replayed by remote_tests everywhere.

Usage: llama_cpp_server_test.py --cli PATH/powerhouse-cli [--model MODEL.gguf]
"""
import json
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from remote_cli_harness import (ARGS, cli, interrupt_streaming_chat, key_files, parse_command_line, run_tests,
                                stop_process)

ALIAS = "smollm2"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaCppServer:
    def __init__(self, *extra, key=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = key
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", ARGS.model,
                                      "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(self.port),
                                      "--n_threads", "2", "--n_ctx", "2048", *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError("llama_cpp.server exited: " + self.log.read().decode(errors="replace")[-2000:])
            try:
                self.get("/v1/models")
                return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError("llama_cpp.server did not answer within 120 s")

    def headers(self):
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def get(self, path):
        with urllib.request.urlopen(urllib.request.Request(self.url + path, headers=self.headers()), timeout=10) as r:
            return json.loads(r.read())

    def complete(self, body):
        """A non-streamed chat completion, from the server itself (the reference)."""
        request = urllib.request.Request(self.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", **self.headers()})
        with urllib.request.urlopen(request, timeout=300) as r:
            return json.loads(r.read())

    def stop(self):
        stop_process(self.proc)
        self.log.close()


class AgainstLlamaCppPython(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LlamaCppServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_models(self):
        run = cli("models", "--remote", self.server.url)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.split(), [ALIAS])

    def forget_the_prompt(self):
        """llama-cpp-python keeps the last prompt's KV cache: the same prompt again re-evaluates
        only its last token, in a batch of one, and at temperature 0 that may pick another
        token than the whole prompt evaluated at once. Another prompt in between makes every
        request below evaluate its own part of the prompt alike."""
        self.server.complete({"model": ALIAS, "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 1})

    def test_streamed_answer_equals_the_servers_own_at_temperature_zero(self):
        for prompt in ["What is the capital of France?", "Name three colours."]:
            with self.subTest(prompt=prompt):
                self.forget_the_prompt()
                reference = self.server.complete({"model": ALIAS, "messages": [{"role": "user", "content": prompt}],
                                                  "max_tokens": 40, "temperature": 0})
                expected = reference["choices"][0]["message"]["content"]
                self.forget_the_prompt()
                run = cli("generate", "--remote", self.server.url, "-p", prompt, "-n", "40", "--temp", "0",
                          "--json")
                self.assertEqual(run.returncode, 0, run.stderr)
                out = json.loads(run.stdout)
                self.assertEqual(out["text"], expected)
                self.assertEqual(out["stop_reason"], reference["choices"][0]["finish_reason"])
                self.assertEqual(out["model"], ALIAS)
                self.assertIsNone(out["usage"])  # llama-cpp-python streams no usage
                self.assertGreater(out["tokens_per_second"], 0)
                self.forget_the_prompt()
                plain = cli("generate", "--remote", self.server.url + "/v1", "-p", prompt, "-n", "40", "--temp", "0")
                self.assertEqual(plain.returncode, 0, plain.stderr)
                self.assertEqual(plain.stdout, expected + "\n")

    def test_stop_strings(self):
        prompt = "Count from 1 to 10, one number per line."
        reference = self.server.complete({"model": ALIAS, "messages": [{"role": "user", "content": prompt}],
                                          "max_tokens": 60, "temperature": 0, "stop": ["5"]})
        run = cli("generate", "--remote", self.server.url, "-p", prompt, "-n", "60", "--temp", "0", "--stop", "5",
                  "--json")
        self.assertEqual(run.returncode, 0, run.stderr)
        out = json.loads(run.stdout)
        self.assertEqual(out["text"], reference["choices"][0]["message"]["content"])
        self.assertNotIn("5", out["text"])
        self.assertEqual(out["stop_reason"], "stop")

    def test_chat_turns(self):
        run = cli("chat", "--remote", self.server.url, "-n", "30", "--temp", "0",
                  stdin="What is 2 + 2?\nAnd that times ten?\n")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.count("\n"), 2)
        self.assertTrue(all(line.strip() for line in run.stdout.splitlines()))

    def test_ctrl_c_stops_a_streaming_answer(self):
        interrupt_streaming_chat(self, self.server.url, "Write a very long story about a lighthouse keeper.",
                                 "-n", "1000", "--temp", "0.8")
        # The server is still fine afterwards.
        self.assertEqual(cli("models", "--remote", self.server.url).returncode, 0)

    def test_a_prompt_longer_than_the_context(self):
        run = cli("generate", "--remote", self.server.url, "-p", "word " * 3000, "-n", "8")
        self.assertEqual(run.returncode, 1)
        # llama-cpp-python answers a streamed request that fails with 200 and an empty body.
        self.assertIn("ended the answer without sending anything", run.stderr)


WEATHER_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


class LlamaCppPythonToolCalls(unittest.TestCase):
    """llama-cpp-python's chatml-function-calling format: forced by tool_choice to call
    get_weather, SmolLM2 writes the call, which the server streams as OpenAI's tool_calls
    pieces (finish_reason "tool_calls")."""

    @classmethod
    def setUpClass(cls):
        cls.server = LlamaCppServer("--chat_format", "chatml-function-calling")
        cls.dir = tempfile.TemporaryDirectory()
        cls.tools = f"{cls.dir.name}/tools.json"
        with open(cls.tools, "w") as f:
            json.dump(WEATHER_TOOLS, f)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def reference_call(self, prompt):
        """The server's own non-streamed answer to the same request: its one call."""
        self.server.complete({"model": ALIAS, "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 1})
        reference = self.server.complete({
            "model": ALIAS, "messages": [{"role": "user", "content": prompt}], "max_tokens": 60, "temperature": 0,
            "tools": WEATHER_TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})
        choice = reference["choices"][0]
        self.assertEqual(choice["finish_reason"], "tool_calls")
        self.assertEqual(len(choice["message"]["tool_calls"]), 1)
        self.server.complete({"model": ALIAS, "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 1})
        return choice["message"]["tool_calls"][0]["function"]

    def test_a_streamed_call_is_the_servers_own(self):
        prompt = "What is the weather in Zürich?"
        expected = self.reference_call(prompt)
        run = cli("generate", "--remote", self.server.url, "-p", prompt, "-n", "60", "--temp", "0",
                  "--tools", self.tools, "--tool-choice", "get_weather", "--json")
        self.assertEqual(run.returncode, 0, run.stderr)
        out = json.loads(run.stdout)
        self.assertEqual(out["stop_reason"], "tool_calls")
        self.assertEqual(out["text"], "")
        self.assertEqual(len(out["tool_calls"]), 1, out)
        call = out["tool_calls"][0]
        self.assertEqual(call["type"], "function")
        self.assertEqual(call["function"]["name"], "get_weather")
        # Put together from the pieces of the stream, the arguments are the whole answer's.
        self.assertEqual(call["function"]["arguments"], expected["arguments"])
        self.assertIn("city", json.loads(call["function"]["arguments"]))
        self.assertTrue(call["id"].startswith("call_"), call)

    def test_generate_and_chat_print_the_call(self):
        prompt = "What is the weather in Paris?"
        expected = self.reference_call(prompt)
        run = cli("generate", "--remote", self.server.url, "-p", prompt, "-n", "60", "--temp", "0",
                  "--tools", self.tools, "--tool-choice", "get_weather")
        self.assertEqual(run.returncode, 0, run.stderr)
        lines = run.stdout.splitlines()
        self.assertEqual(len(lines), 3, run.stdout)
        self.assertEqual((lines[0], lines[2]), ("<tool_call>", "</tool_call>"))
        shown = json.loads(lines[1])
        self.assertEqual(shown["name"], "get_weather")
        self.assertEqual(shown["arguments"], json.loads(expected["arguments"]))
        self.server.complete({"model": ALIAS, "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 1})
        chat = cli("chat", "--remote", self.server.url, "-n", "60", "--temp", "0", "--tools", self.tools,
                   "--tool-choice", "get_weather", stdin=prompt + "\n")
        self.assertEqual(chat.returncode, 0, chat.stderr)
        self.assertEqual(chat.stdout.splitlines()[0], "<tool_call>", chat.stdout)
        self.assertEqual(json.loads(chat.stdout.splitlines()[1])["name"], "get_weather")
        self.assertIn("only called tools, which this chat cannot answer", chat.stderr)


class LlamaCppPythonWithKey(unittest.TestCase):
    KEY = "llama-test-key-31"

    @classmethod
    def setUpClass(cls):
        cls.dir, cls.key_file, cls.wrong_file = key_files(cls.KEY, "wrong-key-77")
        cls.server = LlamaCppServer("--api_key", cls.KEY, key=cls.KEY)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def test_keys(self):
        none = cli("models", "--remote", self.server.url)
        self.assertEqual(none.returncode, 1)
        self.assertIn("needs an API key (HTTP 401 (Unauthorized): Invalid API key)", none.stderr)
        wrong = cli("generate", "--remote", self.server.url, "-m", ALIAS, "-p", "hi", "--api-key-file",
                    self.wrong_file)
        self.assertEqual(wrong.returncode, 1)
        self.assertIn("refused the API key", wrong.stderr)
        self.assertNotIn("wrong-key-77", wrong.stderr)
        right = cli("generate", "--remote", self.server.url, "-p", "hi", "-n", "8", "--temp", "0",
                    "--api-key-file", self.key_file)
        self.assertEqual(right.returncode, 0, right.stderr)
        self.assertTrue(right.stdout.strip())


def main():
    rest = parse_command_line()
    try:
        import llama_cpp.server.app  # noqa: F401  (the server's own modules: FastAPI, ...)
        import uvicorn  # noqa: F401
    except ImportError as e:
        print(f"skipped: llama-cpp-python's server is not installed ({e}); "
              "pip install 'llama-cpp-python[server]' to run this test", file=sys.stderr)
        return 77
    return run_tests(rest, verbosity=2)


if __name__ == "__main__":
    sys.exit(main())
