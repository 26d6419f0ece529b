#!/usr/bin/python3
"""A device failing mid-answer, end to end (issue 23): the desktop app in a real X window
(Xvfb) with the test model, its CPU device told to fail five tokens into the answer
(POWERHOUSE_FAIL_DEVICE=0:5) and a simulated GPU that falls off the bus (Xid 79 in
POWERHOUSE_SIMULATE_GPUS), a question sent with --send. Through AT-SPI (the accessibility
bus screen readers use): the banner says which device failed and where the answer goes on,
the failed GPU's card says so, the answer completes with its note under it, and the banner
goes when its Dismiss button is clicked (a real pointer event, XTest). Then the app is
closed and its database checked: intact, the whole answer stored complete, with where it
went on.

  recovery_e2e_test.py APP [MODEL]     (with DISPLAY set, under dbus-run-session:
                                        with_xvfb.sh dbus-run-session -- /usr/bin/python3 ...)

MODEL defaults to the test model where scripts/fetch-test-model puts it. Exits 77 (skip)
when the test model, pyatspi or the AT-SPI bus launcher is missing.
"""
import json
import sqlite3
import sys

from e2e_support import app_environment, click, find_showing, query, run, wait_for

QUESTION = "Write a Python function that reverses a string."
GPU_FAILURE = "GPU 1 stopped answering: Xid 79, fell off the bus"


def recovery(session, app_path, model, home, data):
    database = data / "powerhouse.db"
    session.start_accessibility_bus()
    env = app_environment(home, POWERHOUSE_FAIL_DEVICE="0:5",
                          POWERHOUSE_SIMULATE_GPUS="RTX 4090:24;RTX 4090:24:xid=79@3")
    session.start_app([app_path, "--data-dir", str(data), "--model", str(model), "--send", QUESTION], env)
    window = session.window()

    # The banner: the engine's words on the failure and on where the answer goes on.
    banner = wait_for("the banner", lambda: find_showing(
        window, lambda name: name.startswith("CPU failed:") and "Continuing on CPU" in name), 120)
    print(f"banner: {banner.name!r}")
    # The GPU the monitor saw fall off the bus, marked on its card.
    wait_for("the failed GPU's card", lambda: find_showing(
        window, lambda name: name.startswith(GPU_FAILURE + ". Nothing runs on it")), 30)

    def answered():
        rows = query(database, "SELECT role, content, state, generated_tokens, recoveries_json FROM messages "
                               "ORDER BY id")
        return rows if rows and len(rows) == 2 and rows[1][2] != "streaming" else None

    messages = wait_for("the answer", answered, 240)
    assert messages[0][:3] == ("user", QUESTION, "complete"), messages
    role, content, state, generated, recoveries = messages[1]
    assert (role, state) == ("assistant", "complete"), messages[1]
    notes = json.loads(recoveries)
    assert len(notes) == 1, recoveries
    note = notes[0]
    assert note["at_token"] > 0 and generated > note["at_token"], (note, generated)
    assert note["failed"] and note["continued_on"].startswith("CPU"), note
    # The note under the answer, as the view writes it.
    shown = wait_for("the note under the answer", lambda: find_showing(
        window, lambda name: name.startswith(f"Continued on {note['continued_on']} after {note['failed']} "
                                             f"failed at token {note['at_token']}")), 30)
    print(f"note: {shown.name!r}")

    # Dismissed, the banner goes.
    click(wait_for("the banner's Dismiss button", lambda: find_showing(
        window, lambda name: name == "Dismiss the device failure banner"), 10))
    wait_for("the banner to go", lambda: not find_showing(window, lambda name: "Continuing on CPU" in name), 10)

    session.stop_app()
    db = sqlite3.connect(str(database))
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = db.execute("SELECT content, state, recoveries_json FROM messages ORDER BY id").fetchall()
    db.close()
    assert stored[1] == (content, "complete", recoveries), "the answer changed after it was stored"
    assert len(content.strip()) > 0
    print(f"ok: {generated} tokens, continued on {note['continued_on']} after token {note['at_token']}")
    return 0

if __name__ == "__main__":
    sys.exit(run(recovery))
