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
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HUB = HERE.parent / "library" / "hub_test_server.py"
REPO = "smol-org/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LAUNCHER = Path("/usr/libexec/at-spi-bus-launcher")


def skip(why):
    print(f"skipped: {why}")
    sys.exit(77)


def wait_for(what, predicate, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def find(node, predicate):
    """The first accessible under `node` (depth first) for which predicate holds."""
    try:
        if predicate(node):
            return node
        for i in range(node.childCount):
            found = find(node.getChildAtIndex(i), predicate)
            if found is not None:
                return found
    except Exception:  # an object that went away while walking: not this one
        return None
    return None


def showing(node):
    import pyatspi
    return node.getState().contains(pyatspi.STATE_SHOWING)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    app_path = sys.argv[1]
    if len(sys.argv) > 2:
        model = Path(sys.argv[2])
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        model = Path(os.environ.get("POWERHOUSE_TEST_MODEL") or cache / "powerhouse/test-models" / FILE)
    if not model.exists():
        skip(f"no test model at {model}")
    try:
        import pyatspi
    except ImportError:
        skip("pyatspi is not installed (package python3-pyatspi)")
    if not LAUNCHER.exists():
        skip("the AT-SPI bus launcher is not installed (package at-spi2-core)")
    if not os.environ.get("DISPLAY"):
        sys.exit("no DISPLAY: run me under with_xvfb.sh (or xvfb-run)")

    processes = []
    launcher_group = [None]  # the accessibility bus launcher, leader of its process group
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        home = tmp / "home"
        home.mkdir()
        data = tmp / "data"
        suggestions = tmp / "suggested.json"
        suggestions.write_text(json.dumps({"version": 1, "models": [{
            "name": "SmolLM2 135M Instruct", "summary": "The test model, from the loopback Hub.", "repo": REPO,
            "quantization": "Q4_1", "like": "smollm2-135m", "type": "q4_1", "files": [{"path": FILE}]}]}))
        try:
            hub = subprocess.Popen([sys.executable, str(HUB), "--serve", f"{REPO}/{FILE}={model}"],
                                   stdout=subprocess.PIPE, text=True)
            processes.append(hub)
            endpoint = f"http://127.0.0.1:{int(hub.stdout.readline())}"
            # The accessibility bus: its launcher starts a dbus-daemon of its own; all of them in
            # one process group, killed together at the end, and none holding our output open.
            launcher = subprocess.Popen([str(LAUNCHER), "--launch-immediately"], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
            processes.append(launcher)
            launcher_group[0] = launcher
            time.sleep(1)
            env = dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(home / ".local/share"),
                       XDG_CACHE_HOME=str(home / ".cache"), XDG_CONFIG_HOME=str(home / ".config"),
                       HF_ENDPOINT=endpoint, QT_QPA_PLATFORM="xcb", QT_LINUX_ACCESSIBILITY_ALWAYS_ON="1")
            env.pop("POWERHOUSE_TEST_MODEL", None)
            env.pop("POWERHOUSE_SIMULATE_GPUS", None)
            # Now and then (about one start in five here) the app's first connection to a fresh
            # Xvfb is refused while the accessibility bus starts ("could not connect to
            # display"); the window never opened then, so starting again is the same first run.
            for attempt in range(3):
                log = open(tmp / "app.log", "w")
                app = subprocess.Popen([app_path, "--data-dir", str(data), "--suggestions", str(suggestions),
                                        "--send", "Say hello in one word."], env=env, stdout=log,
                                       stderr=subprocess.STDOUT)
                try:
                    app.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    break
                log.close()
                refused = "could not connect to display" in (tmp / "app.log").read_text()
                if not refused:
                    raise AssertionError(f"the app ended at once ({app.returncode})")
                print(f"the X server refused the app's connection (start {attempt + 1}); starting it again",
                      file=sys.stderr)
                time.sleep(1)
            processes.append(app)

            def application():
                desktop = pyatspi.Registry.getDesktop(0)
                for i in range(desktop.childCount):
                    child = desktop.getChildAtIndex(i)
                    if child is not None and child.name == "Powerhouse":
                        return child
                return None

            window = wait_for("the app on the accessibility bus", application, 60)
            # The welcome view: no model yet, and the suggestion planned on this machine.
            button = wait_for("the suggestion's button", lambda: find(
                window, lambda n: n.name == "Download and load SmolLM2 135M Instruct" and showing(n)), 60)
            assert find(window, lambda n: n.name == "Welcome to Powerhouse" and showing(n)), "no welcome view"
            box = button.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
            pyatspi.Registry.generateMouseEvent(box.x + box.width // 2, box.y + box.height // 2, pyatspi.MOUSE_B1C)

            # Downloaded into the library, loaded (the model bar names it), and the answer in.
            downloaded = data / "models" / FILE
            wait_for("the download", lambda: downloaded.exists(), 60)
            wait_for("the model bar to name the model", lambda: find(
                window, lambda n: n.name == "Model: SmolLM2 135M Instruct · Q4_1" and showing(n)), 60)

            def answered():
                if not (data / "powerhouse.db").exists():
                    return None
                db = sqlite3.connect(f"file:{data / 'powerhouse.db'}?mode=ro", uri=True, timeout=5)
                try:
                    rows = db.execute("SELECT role, content, state FROM messages ORDER BY id").fetchall()
                except sqlite3.OperationalError:
                    return None
                finally:
                    db.close()
                return rows if len(rows) == 2 and rows[1][2] == "complete" else None

            messages = wait_for("the answer", answered, 120)
            assert messages[0][:2] == ("user", "Say hello in one word."), messages
            assert messages[1][0] == "assistant" and messages[1][1].strip(), messages
            # The welcome view made way for the chat.
            assert not find(window, lambda n: n.name == "Welcome to Powerhouse" and showing(n)), "welcome still shown"

            app.send_signal(signal.SIGTERM)
            app.wait(timeout=30)
            log.close()
            db = sqlite3.connect(str(data / "powerhouse.db"))
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            path = db.execute("SELECT value FROM app_settings WHERE key = 'model_path'").fetchone()
            assert path is not None and Path(path[0]) == downloaded, path
            sha = db.execute("SELECT sha256 FROM models WHERE path = ?", (str(downloaded),)).fetchone()
            assert sha is not None and len(sha[0]) == 64, f"the download was not verified: {sha}"
            db.close()
            print(f"ok: downloaded {downloaded.stat().st_size} bytes through the Hub, answered {messages[1][1]!r}")
            return 0
        except Exception:
            log_file = tmp / "app.log"
            if log_file.exists():
                print("app log:\n" + log_file.read_text()[-4000:], file=sys.stderr)
            raise
        finally:
            for p in reversed(processes):
                if p is launcher_group[0]:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                if p.poll() is None:
                    p.kill()
                p.wait()


if __name__ == "__main__":
    sys.exit(main())
