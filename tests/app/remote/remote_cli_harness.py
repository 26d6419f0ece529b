"""What the tests of powerhouse-cli's remote engine share (remote_serve_test.py against `serve`,
llama_cpp_server_test.py against llama-cpp-python's server): the command line (--cli PATH
[--model MODEL.gguf]), running powerhouse-cli, stopping a server, API key files, and Ctrl+C on
a streaming `chat --remote`.

The model: --model, else $POWERHOUSE_TEST_MODEL, else the one scripts/fetch-test-model puts
in the cache.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ARGS = argparse.Namespace(cli=None, model=None)


def parse_command_line():
    """Reads --cli and --model into ARGS; returns the arguments left for unittest."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--model")
    args, rest = parser.parse_known_args()
    ARGS.cli = args.cli
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    ARGS.model = args.model or os.environ.get("POWERHOUSE_TEST_MODEL") or os.path.join(
        cache, "powerhouse", "test-models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    return rest


def run_tests(rest, verbosity=1):
    """Runs the tests of the script (__main__) when the model is there; returns the exit status."""
    if not os.path.isfile(ARGS.model):
        print(f"the test model {ARGS.model} is missing: run scripts/fetch-test-model", file=sys.stderr)
        return 1
    program = unittest.main(module="__main__", argv=[sys.argv[0], *rest], exit=False, verbosity=verbosity)
    return 0 if program.result.wasSuccessful() else 1


def cli(*args, stdin=None, env=None):
    """powerhouse-cli ARGS, with `env` added to the environment."""
    return subprocess.run([ARGS.cli, *args], input=stdin, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **(env or {})))


def stop_process(proc):
    """SIGTERM, then SIGKILL when it has not exited after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def key_files(key_text, wrong_text):
    """A temporary folder with an API key's file and a wrong key's: (folder, key_file, wrong_file)."""
    folder = tempfile.TemporaryDirectory()
    paths = []
    for name, text in (("key", key_text), ("wrong", wrong_text)):
        paths.append(os.path.join(folder.name, name))
        with open(paths[-1], "w") as f:
            f.write(text)
    return folder, paths[0], paths[1]


def interrupt_streaming_chat(test, url, prompt, *options):
    """`chat --remote URL OPTIONS` with PROMPT: Ctrl+C once the answer streams, then /exit. Checks
    that the answer stopped and the chat exited 0; returns the seconds from Ctrl+C to the exit."""
    proc = subprocess.Popen([ARGS.cli, "chat", "--remote", url, *options], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdin.write(prompt + "\n")
    proc.stdin.flush()
    # Wait for the answer to stream, then interrupt it.
    test.assertTrue(proc.stdout.read(1), "no answer streamed")
    proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    proc.stdin.write("/exit\n")
    proc.stdin.flush()
    _, err = proc.communicate(timeout=60)
    seconds = time.monotonic() - start
    test.assertEqual(proc.returncode, 0, err)
    test.assertIn("(stopped)", err)
    return seconds
