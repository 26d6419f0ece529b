"""What the tests of `powerhouse-cli serve` share: the server process, a test case class
with one server for all its tests, and the command line (--cli PATH [--model MODEL.gguf]).

The model: --model, else $POWERHOUSE_TEST_MODEL, else the one scripts/fetch-test-model
puts in the cache.
"""
import argparse
import json
import os
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

import openai

from serve_process import start_serve

ARGS = argparse.Namespace(cli=None, model=None)


class Server:
    """A `serve` process on a free port of 127.0.0.1."""

    def __init__(self, *extra):
        self.proc, self.model, self.base = start_serve(ARGS.cli, ARGS.model, *extra)

    def client(self, key="none"):
        return openai.OpenAI(base_url=self.base + "/v1", api_key=key, max_retries=0, timeout=120)

    def post(self, path, body: bytes, headers=None):
        req = urllib.request.Request(self.base + path, data=body, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def stop(self):
        self.proc.terminate()  # SIGTERM: stop accepting, let what runs end, exit
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def close(self):
        """Stops the server and says how it exited (0 expected), its pipes closed."""
        try:
            return self.stop()
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


class ServedTestCase(unittest.TestCase):
    """One server (started with SERVE_ARGS) and one openai client for all the tests of the class."""

    SERVE_ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.server = Server(*cls.SERVE_ARGS)
        cls.api = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.api.close()
        status = cls.server.close()
        assert status == 0, f"serve exited with {status} on SIGTERM"


def ask(text):
    return [{"role": "user", "content": text}]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--model")
    args, rest = parser.parse_known_args()
    ARGS.cli = args.cli
    ARGS.model = args.model
    if not ARGS.model:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        ARGS.model = os.environ.get("POWERHOUSE_TEST_MODEL") or os.path.join(
            cache, "powerhouse", "test-models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    unittest.main(module="__main__", argv=[sys.argv[0], "-v", *rest])
