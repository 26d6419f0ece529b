#!/usr/bin/python3
"""The first run, end to end, as a user goes through it: the desktop app in a real X window
(Xvfb) with no model and an empty home, the loopback Hugging Face Hub (hub_test_server.py)
serving the test model, the welcome view's "Download and load" button found by its
accessible name through AT-SPI (the accessibility bus screen readers use) and clicked with
a real pointer event (XTest), the model downloaded, verified and loaded, a question sent
with --send and its answer stored. Then the app is closed and its database checked.

  first_run_e2e_test.py APP [MODEL]    (with DISPLAY set, under dbus-run-session:
                                        with_xvfb.sh dbus-run-session -- /usr/bin/python3 ...)

MODEL defaults to the test model where scripts/fetch-test-model puts it. Exits 77 (skip)
when the test model, pyatspi or the AT-SPI bus launcher is missing. The Debian python3 runs
it: pyatspi is a Debian package (python3-pyatspi), not on PyPI.
"""
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from e2e_support import app_environment, click, find_showing, query, run, wait_for

HERE = Path(__file__).resolve().parent
HUB = HERE.parent / "library" / "hub_test_server.py"
REPO = "smol-org/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def first_run(session, app_path, model, home, data):
    suggestions = session.tmp / "suggested.json"
    suggestions.write_text(json.dumps({"version": 1, "models": [{
        "name": "SmolLM2 135M Instruct", "summary": "The test model, from the loopback Hub.", "repo": REPO,
        "quantization": "Q4_1", "like": "smollm2-135m", "type": "q4_1", "files": [{"path": FILE}]}]}))
    hub = session.spawn([sys.executable, str(HUB), "--serve", f"{REPO}/{FILE}={model}"],
                        stdout=subprocess.PIPE, text=True)
    endpoint = f"http://127.0.0.1:{int(hub.stdout.readline())}"
    session.start_accessibility_bus()
    session.start_app([app_path, "--data-dir", str(data), "--suggestions", str(suggestions),
                       "--send", "Say hello in one word."], app_environment(home, HF_ENDPOINT=endpoint))
    window = session.window()
    # The welcome view: no model yet, and the suggestion planned on this machine.
    button = wait_for("the suggestion's button", lambda: find_showing(
        window, lambda name: name == "Download and load SmolLM2 135M Instruct"), 60)
    assert find_showing(window, lambda name: name == "Welcome to Powerhouse"), "no welcome view"
    click(button)

    # Downloaded into the library, loaded (the model bar names it), and the answer in.
    downloaded = data / "models" / FILE
    wait_for("the download", lambda: downloaded.exists(), 60)
    wait_for("the model bar to name the model", lambda: find_showing(
        window, lambda name: name == "Model: SmolLM2 135M Instruct · Q4_1"), 60)

    def answered():
        rows = query(data / "powerhouse.db", "SELECT role, content, state FROM messages ORDER BY id")
        return rows if rows and len(rows) == 2 and rows[1][2] == "complete" else None

    messages = wait_for("the answer", answered, 120)
    assert messages[0][:2] == ("user", "Say hello in one word."), messages
    assert messages[1][0] == "assistant" and messages[1][1].strip(), messages
    # The welcome view made way for the chat.
    assert not find_showing(window, lambda name: name == "Welcome to Powerhouse"), "welcome still shown"

    session.stop_app()
    db = sqlite3.connect(str(data / "powerhouse.db"))
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    path = db.execute("SELECT value FROM app_settings WHERE key = 'model_path'").fetchone()
    assert path is not None and Path(path[0]) == downloaded, path
    sha = db.execute("SELECT sha256 FROM models WHERE path = ?", (str(downloaded),)).fetchone()
    assert sha is not None and len(sha[0]) == 64, f"the download was not verified: {sha}"
    db.close()
    print(f"ok: downloaded {downloaded.stat().st_size} bytes through the Hub, answered {messages[1][1]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(run(first_run))
