#!/usr/bin/env python3
"""scripts/update-suggested-models against the loopback Hub (hub_test_server.py): a list
without sizes and hashes is reported by --check, filled in with the served file's real
size and sha256 (computed here, not by the Hub), then --check passes; a file the
repository lacks is named and fails the run.  Usage: update_suggested_models_test.py [MODEL]
(default: the test model where scripts/fetch-test-model puts it)."""
import os
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
REPO = "smol-org/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def run(args, list_file, endpoint):
    return subprocess.run([sys.executable, str(ROOT / "scripts/update-suggested-models"), "--list", str(list_file),
                           "--endpoint", endpoint, *args], capture_output=True, text=True, timeout=120)


def main():
    if len(sys.argv) > 1:
        model = Path(sys.argv[1])
    elif os.environ.get("POWERHOUSE_TEST_MODEL"):
        model = Path(os.environ["POWERHOUSE_TEST_MODEL"])
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        model = cache / "powerhouse/test-models/SmolLM2-135M-Instruct.Q4_1.gguf"
    if not model.exists():
        print(f"no test model at {model}: skipped")
        return 77
    hub = subprocess.Popen([sys.executable, str(HERE / "hub_test_server.py"), "--serve", f"{REPO}/{FILE}={model}"],
                           stdout=subprocess.PIPE, text=True)
    try:
        endpoint = f"http://127.0.0.1:{int(hub.stdout.readline())}"
        with tempfile.TemporaryDirectory() as tmp:
            list_file = Path(tmp) / "suggested.json"
            entry = {"name": "SmolLM2", "repo": REPO, "quantization": "Q4_1", "like": "smollm2-135m", "type": "q4_1",
                     "files": [{"path": FILE, "size": None, "sha256": None}]}
            list_file.write_text(json.dumps({"version": 1, "models": [entry]}))
            checked = run(["--check"], list_file, endpoint)
            assert checked.returncode == 1, checked
            assert json.loads(list_file.read_text())["models"][0]["files"][0]["sha256"] is None, "--check changed the list"
            filled = run([], list_file, endpoint)
            assert filled.returncode == 0, filled
            written = json.loads(list_file.read_text())["models"][0]["files"][0]
            digest = hashlib.sha256(model.read_bytes()).hexdigest()
            assert written == {"path": FILE, "size": model.stat().st_size, "sha256": digest}, written
            assert run(["--check"], list_file, endpoint).returncode == 0
            entry["files"] = [{"path": "Missing-Q4_K_M.gguf"}]
            list_file.write_text(json.dumps({"version": 1, "models": [entry]}))
            missing = run([], list_file, endpoint)
            assert missing.returncode == 1 and "has no file Missing-Q4_K_M.gguf" in missing.stderr, missing
    finally:
        hub.kill()
        hub.wait()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
