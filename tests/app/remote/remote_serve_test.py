#!/usr/bin/env python3
"""powerhouse-cli's remote engine against another powerhouse-cli: `serve` on 127.0.0.1 (with
simulated GPUs), driven by `generate --remote`, `chat --remote`, `models --remote` and
`gpus --metrics`. The remote answer at temperature 0 must equal the local one, word for word.

Usage: remote_serve_test.py --cli PATH/powerhouse-cli [--model MODEL.gguf]
The model: --model, else $POWERHOUSE_TEST_MODEL, else the one scripts/fetch-test-model puts
in the cache.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from remote_cli_harness import (ARGS, cli, interrupt_streaming_chat, key_files, parse_command_line, run_tests,
                                stop_process)

SIMULATED = "RTX 4090:24;A100:80"


class Server:
    """A `serve` process on a free port of 127.0.0.1 ("serving ID on http://127.0.0.1:PORT")."""

    def __init__(self, *extra):
        env = dict(os.environ, POWERHOUSE_SIMULATE_GPUS=SIMULATED)
        self.proc = subprocess.Popen([ARGS.cli, "serve", "-m", ARGS.model, "--port", "0", "-t", "2", "--ctx", "2048",
                                      *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if not line.startswith("serving "):
            self.proc.kill()
            raise RuntimeError(f"serve did not start: {line!r} {self.proc.stderr.read()}")
        self.model = line.split()[1]
        self.url = line.split()[-1]

    def stop(self):
        stop_process(self.proc)
        self.proc.stdout.close()
        self.proc.stderr.close()


def local(*args, stdin=None):
    return cli(*args[:1], "-m", ARGS.model, "-t", "2", "--ctx", "2048", *args[1:], stdin=stdin)


class RemoteAgainstServe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_remote_generate_equals_local_at_temperature_zero(self):
        for prompt in ["What is the capital of France?", "Write a haiku about GPUs.",
                       "List three prime numbers and explain why they are prime."]:
            with self.subTest(prompt=prompt):
                here = local("generate", "-p", prompt, "-n", "48", "--temp", "0")
                self.assertEqual(here.returncode, 0, here.stderr)
                # The base URL with and without /v1.
                for url in (self.server.url, self.server.url + "/v1/"):
                    there = cli("generate", "--remote", url, "-p", prompt, "-n", "48", "--temp", "0")
                    self.assertEqual(there.returncode, 0, there.stderr)
                    self.assertEqual(there.stdout, here.stdout)
                    self.assertNotIn("warning", there.stderr)  # loopback: no plain-http warning
                    self.assertTrue(len(there.stdout.strip()) > 0)

    def test_json_has_the_servers_counts(self):
        run = cli("generate", "--remote", self.server.url, "-m", self.server.model, "-p", "Count to three.",
                  "-n", "16", "--temp", "0", "--json")
        self.assertEqual(run.returncode, 0, run.stderr)
        out = json.loads(run.stdout)
        self.assertEqual(out["model"], self.server.model)
        self.assertIn(out["stop_reason"], ("stop", "length"))
        self.assertGreater(out["usage"]["prompt_tokens"], 5)
        self.assertGreaterEqual(out["usage"]["completion_tokens"], 1)
        self.assertLessEqual(out["usage"]["completion_tokens"], 16)
        self.assertGreater(out["time_to_first_token"], 0)
        plain = cli("generate", "--remote", self.server.url, "-p", "Count to three.", "-n", "16", "--temp", "0")
        self.assertEqual(plain.stdout, out["text"] + "\n")

    def test_remote_chat_equals_local_chat(self):
        turns = "What is 2 + 2?\nAnd what is that times ten?\n/exit\n"
        here = local("chat", "-n", "40", "--temp", "0", "--system", "You are a terse calculator.", stdin=turns)
        there = cli("chat", "--remote", self.server.url, "-n", "40", "--temp", "0", "--system",
                    "You are a terse calculator.", stdin=turns)
        self.assertEqual(here.returncode, 0, here.stderr)
        self.assertEqual(there.returncode, 0, there.stderr)
        self.assertEqual(there.stdout, here.stdout)
        self.assertEqual(there.stdout.count("\n"), 2)

    def test_stop_strings_and_sampling_reach_the_server(self):
        run = cli("generate", "--remote", self.server.url, "-p", "Count from 1 to 10, one number per line.",
                  "-n", "40", "--temp", "0", "--stop", "4", "--json")
        self.assertEqual(run.returncode, 0, run.stderr)
        out = json.loads(run.stdout)
        self.assertEqual(out["stop_reason"], "stop")
        self.assertNotIn("4", out["text"])
        self.assertIn("3", out["text"])
        # A seed gives the same sample twice.
        runs = [cli("generate", "--remote", self.server.url, "-p", "Tell me a story.", "-n", "24", "--temp", "1.0",
                    "--seed", "7") for _ in range(2)]
        self.assertEqual(runs[0].returncode, 0, runs[0].stderr)
        self.assertEqual(runs[0].stdout, runs[1].stdout)

    def test_a_forced_tool_call_comes_back_as_a_call(self):
        """`serve` constrains SmolLM2 to a call of the named tool; --remote reads it back."""
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "tools.json")
            with open(path, "w") as f:
                json.dump(tools, f)
            run = cli("generate", "--remote", self.server.url, "-p", "What is the weather in Paris?", "-n", "48",
                      "--temp", "0", "--tools", path, "--tool-choice", "get_weather", "--json")
        self.assertEqual(run.returncode, 0, run.stderr)
        out = json.loads(run.stdout)
        self.assertEqual(out["stop_reason"], "tool_calls")
        self.assertEqual(len(out["tool_calls"]), 1, out)
        self.assertEqual(out["tool_calls"][0]["function"]["name"], "get_weather")
        self.assertIsInstance(json.loads(out["tool_calls"][0]["function"]["arguments"])["city"], str)

    def test_models_lists_the_served_model(self):
        run = cli("models", "--remote", self.server.url)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.split(), [self.server.model])
        out = json.loads(cli("models", "--remote", self.server.url + "/v1", "--json").stdout)
        self.assertEqual(out, {"base_url": self.server.url + "/v1", "models": [self.server.model]})

    def test_an_unknown_model_is_named_with_what_the_server_has(self):
        run = cli("generate", "--remote", self.server.url, "-m", "no-such-model", "-p", "hi")
        self.assertEqual(run.returncode, 1)
        self.assertEqual(run.stdout, "")
        self.assertIn(f"the server has no model 'no-such-model'; it has: {self.server.model}", run.stderr)

    def test_gpus_metrics_shows_the_servers_simulated_gpus(self):
        run = cli("gpus", "--metrics", self.server.url + "/metrics")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("SIMULATED", run.stdout)
        self.assertIn("RTX 4090", run.stdout)
        self.assertIn("A100", run.stdout)
        self.assertIn("24.00 GiB", run.stdout)
        self.assertIn("80.00 GiB", run.stdout)
        self.assertIn("Engine Powerhouse:", run.stdout)
        self.assertIn("KV cache", run.stdout)
        out = json.loads(cli("gpus", "--metrics", self.server.url, "--json").stdout)  # /metrics by default
        self.assertEqual(len(out["hosts"]), 1)
        host = out["hosts"][0]
        self.assertEqual(host["host"], "127.0.0.1")
        self.assertEqual([g["name"] for g in host["gpus"]], ["RTX 4090", "A100"])
        self.assertTrue(all(g["simulated"] for g in host["gpus"]))
        self.assertEqual(host["gpus"][1]["memory_total_bytes"], 80 * 1024 ** 3)
        self.assertEqual(host["engines"][0]["engine"], "Powerhouse")
        # The same GPUs as the local `gpus` shows with the same simulation.
        mine = json.loads(cli("gpus", "--json", env={"POWERHOUSE_SIMULATE_GPUS": SIMULATED}).stdout)
        self.assertEqual([g["uuid"] for g in host["gpus"]], [g["uuid"] for g in mine["gpus"]])

    def test_ctrl_c_stops_a_remote_answer(self):
        seconds = interrupt_streaming_chat(self, self.server.url,
                                           "Write a very long story about a lighthouse keeper, with many chapters.",
                                           "-n", "1500", "--temp", "0.7", "--seed", "1")
        self.assertLess(seconds, 10)

    def test_local_only_options_are_refused_with_remote(self):
        run = cli("generate", "--remote", self.server.url, "--ctx", "512", "-p", "hi")
        self.assertEqual(run.returncode, 2)
        self.assertIn("excludes", run.stderr)
        run = cli("generate", "--api-key-file", "/dev/null", "-p", "hi")
        self.assertEqual(run.returncode, 2)  # --api-key-file needs --remote

    def test_plain_http_to_another_machine_is_warned_about(self):
        # 0.0.0.0 is not loopback by name; connecting to it reaches this machine only.
        run = cli("models", "--remote", "http://0.0.0.0:1")
        self.assertEqual(run.returncode, 1)
        self.assertIn("warning: http://0.0.0.0:1/v1 is plain http to another machine", run.stderr)
        self.assertIn("cannot connect", run.stderr)


QWEN35_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "templates",
                               "Qwen3.5-4B.jinja")


class RemoteThinkingAgainstServe(unittest.TestCase):
    """`serve --chat-template` with Qwen3.5's template (the think block opened unless
    enable_thinking is false): --remote's --no-think, sent as chat_template_kwargs, turns the
    thinking off there as local --no-think does here, answer for answer."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--chat-template", QWEN35_TEMPLATE)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def answers(self, *options):
        here = local("generate", "--chat-template", QWEN35_TEMPLATE, "-p", "What is 2+2?", "-n", "12", "--temp", "0",
                     "--json", *options)
        self.assertEqual(here.returncode, 0, here.stderr)
        there = cli("generate", "--remote", self.server.url, "-p", "What is 2+2?", "-n", "12", "--temp", "0",
                    "--json", *options)
        self.assertEqual(there.returncode, 0, there.stderr)
        return json.loads(here.stdout), json.loads(there.stdout)

    def test_no_think_reaches_the_servers_template(self):
        here, there = self.answers()
        self.assertEqual(there["text"], "")  # all of it thinking, on both sides
        self.assertTrue(there["reasoning"])
        self.assertEqual((there["text"], there["reasoning"]), (here["text"], here["reasoning"]))
        here, there = self.answers("--no-think")
        self.assertNotIn("reasoning", there)
        self.assertTrue(there["text"])
        self.assertEqual(there["text"], here["text"])
        self.assertNotIn("reasoning", here)
        # chat too, turn after turn.
        turns = "What is 2+2?\nAnd 3+3?\n"
        here = local("chat", "--chat-template", QWEN35_TEMPLATE, "-n", "12", "--temp", "0", "--no-think", stdin=turns)
        there = cli("chat", "--remote", self.server.url, "-n", "12", "--temp", "0", "--no-think", stdin=turns)
        self.assertEqual(here.returncode, 0, here.stderr)
        self.assertEqual(there.returncode, 0, there.stderr)
        self.assertNotIn("<think>", there.stdout)
        self.assertEqual(there.stdout, here.stdout)

    def test_reasoning_effort_reaches_the_servers_template(self):
        # A template whose prompt spells the effort out: "high" and "low" make prompts of
        # different lengths, counted by the server as the local model counts them.
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "effort.jinja")
            with open(path, "w") as f:
                f.write("{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
                        "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                        "{%- if reasoning_effort is defined and reasoning_effort == 'high' %}"
                        "{{ 'Think hard and long before you answer.\\n' }}{%- endif %}{%- endif %}")
            server = Server("--chat-template", path)
            try:
                counts = {}
                for effort in ("low", "high"):
                    here = local("generate", "--chat-template", path, "-p", "hi", "-n", "1", "--json",
                                 "--reasoning-effort", effort)
                    self.assertEqual(here.returncode, 0, here.stderr)
                    there = cli("generate", "--remote", server.url, "-p", "hi", "-n", "1", "--json",
                                "--reasoning-effort", effort)
                    self.assertEqual(there.returncode, 0, there.stderr)
                    counts[effort] = json.loads(there.stdout)["usage"]["prompt_tokens"]
                    self.assertEqual(counts[effort], len(json.loads(here.stdout)["prompt_ids"]))
                self.assertGreater(counts["high"], counts["low"])
            finally:
                server.stop()

    def test_a_template_that_cannot_be_used_stops_serve_naming_the_file(self):
        run = cli("serve", "-m", ARGS.model, "--port", "0", "--chat-template", QWEN35_TEMPLATE + ".missing")
        self.assertEqual(run.returncode, 1)
        self.assertEqual(run.stdout, "")
        self.assertIn(f"error: --chat-template: cannot open '{QWEN35_TEMPLATE}.missing'", run.stderr)


class RemoteWithApiKey(unittest.TestCase):
    KEY = "ph-test-key-8c1f"

    @classmethod
    def setUpClass(cls):
        cls.dir, cls.key_file, cls.wrong_file = key_files(cls.KEY + "\n", "not-the-key\n")
        cls.server = Server("--api-key-file", cls.key_file)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def test_the_key_opens_the_server_and_is_never_shown(self):
        none = cli("generate", "--remote", self.server.url, "-p", "hi", "-n", "4")
        self.assertEqual(none.returncode, 1)
        self.assertIn("needs an API key", none.stderr)
        wrong = cli("generate", "--remote", self.server.url, "-m", self.server.model, "-p", "hi", "-n", "4",
                    "--api-key-file", self.wrong_file)
        self.assertEqual(wrong.returncode, 1)
        self.assertIn("refused the API key", wrong.stderr)
        self.assertNotIn("not-the-key", wrong.stderr + wrong.stdout)
        right = cli("generate", "--remote", self.server.url, "-p", "hi", "-n", "4", "--temp", "0",
                    "--api-key-file", self.key_file)
        self.assertEqual(right.returncode, 0, right.stderr)
        self.assertNotIn(self.KEY, right.stderr + right.stdout)
        metrics = cli("gpus", "--metrics", self.server.url, "--api-key-file", self.key_file)
        self.assertEqual(metrics.returncode, 0, metrics.stderr)
        self.assertIn("RTX 4090", metrics.stdout)
        refused = cli("gpus", "--metrics", self.server.url)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("needs an API key", refused.stderr)


def main():
    return run_tests(parse_command_line())


if __name__ == "__main__":
    sys.exit(main())
