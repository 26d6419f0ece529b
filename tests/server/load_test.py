#!/usr/bin/env python3
"""scripts/load-test against `powerhouse-cli serve`, bounded: 32 streaming clients at once,
16 tokens each, then every prompt alone; every stream must end properly (finish_reason, then
[DONE]) and equal its prompt's answer alone. Normal build only (ctest label
server_load_tests): under the sanitizers it would take minutes and prove nothing more.

Usage: load_test.py --cli PATH/powerhouse-cli [--model MODEL.gguf]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import unittest

ARGS = None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class LoadTest(unittest.TestCase):
    def test_32_streaming_clients_each_get_their_answer_alone(self):
        proc = subprocess.Popen([ARGS.cli, "serve", "-m", ARGS.model, "--port", "0", "-t", "2", "--ctx", "2048",
                                 "--parallel", "32"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()  # "serving MODEL on http://127.0.0.1:PORT"
            self.assertTrue(line.startswith("serving "), line)
            model, base = line.split()[1], line.split()[-1]
            run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "load-test"), "--base-url", base,
                                  "--model", model, "--clients", "32", "--max-tokens", "16", "--check-alone", "--json",
                                  "--timeout", "240"], capture_output=True, text=True, timeout=500)
            print(run.stdout, run.stderr, file=sys.stderr)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            figures = json.loads(run.stdout.strip().splitlines()[-1])
            self.assertEqual(figures["failures"], 0)
            self.assertEqual(figures["truncations"], 0)
            self.assertEqual(figures["mismatches"], 0)
            self.assertGreater(figures["generated_tokens"], 32)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                status = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
            stderr = proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
        self.assertEqual(status, 0, stderr[-2000:])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--model")
    ARGS, rest = parser.parse_known_args()
    if not ARGS.model:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        ARGS.model = os.environ.get("POWERHOUSE_TEST_MODEL") or os.path.join(
            cache, "powerhouse", "test-models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    unittest.main(argv=[sys.argv[0], "-v", *rest])
