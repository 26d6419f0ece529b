"""What the desktop app's end-to-end tests share: the app in a real X window (DISPLAY set by
with_xvfb.sh) with its accessibility bus, found and driven through AT-SPI (pyatspi, the
Debian package python3-pyatspi: run these with /usr/bin/python3), and every process they
start killed at the end. A missing prerequisite skips the test (exit 77).
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAUNCHER = Path("/usr/libexec/at-spi-bus-launcher")
TEST_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def skip(why):
    print(f"skipped: {why}")
    sys.exit(77)


def default_model():
    """The test model where scripts/fetch-test-model puts it (or $POWERHOUSE_TEST_MODEL)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("POWERHOUSE_TEST_MODEL") or cache / "powerhouse/test-models" / TEST_MODEL)


def require(model):
    """Skips unless the model, pyatspi and the bus launcher are there; the pyatspi module."""
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
    return pyatspi


def run(test):
    """A test's main: `APP [MODEL]` from the command line (MODEL defaults to the test model),
    the prerequisites checked, then test(session, app, model, home, data) in a temporary
    folder (an empty home, the app's data folder) with everything it started killed at the
    end. Returns what the test returns."""
    if len(sys.argv) < 2:
        sys.exit(sys.modules["__main__"].__doc__)
    app_path = sys.argv[1]
    model = Path(sys.argv[2]) if len(sys.argv) > 2 else default_model()
    require(model)
    with tempfile.TemporaryDirectory() as tmp, Session(tmp) as session:
        home = Path(tmp) / "home"
        home.mkdir()
        return test(session, app_path, model, home, Path(tmp) / "data")


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


def find_showing(window, predicate):
    return find(window, lambda n: predicate(n.name or "") and showing(n))


def click(node):
    """A real pointer click (XTest) in the middle of `node`."""
    import pyatspi
    box = node.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
    pyatspi.Registry.generateMouseEvent(box.x + box.width // 2, box.y + box.height // 2, pyatspi.MOUSE_B1C)


def app_environment(home, **extra):
    """The app's environment: a fake home, xcb with accessibility on, no test variables but `extra`."""
    env = dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_CACHE_HOME=str(home / ".cache"), XDG_CONFIG_HOME=str(home / ".config"),
               QT_QPA_PLATFORM="xcb", QT_LINUX_ACCESSIBILITY_ALWAYS_ON="1")
    for name in ("POWERHOUSE_TEST_MODEL", "POWERHOUSE_SIMULATE_GPUS", "POWERHOUSE_FAIL_DEVICE"):
        env.pop(name, None)
    env.update(extra)
    return env


def query(db_path, sql):
    """The rows of `sql` on the app's database, read only while the app runs; None while the
    file or its tables are not there yet."""
    import sqlite3
    if not Path(db_path).exists():
        return None
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return None
    finally:
        db.close()


class Session:
    """The processes of one run: what `spawn` started, the accessibility bus, the app. Used
    as a context manager: everything is killed at the end, and the app's log printed if the
    run failed."""

    def __init__(self, tmp):
        self.tmp = Path(tmp)
        self.log_path = self.tmp / "app.log"
        self.processes = []
        self.launcher = None  # leader of its process group (its dbus-daemon is in it)
        self.app = None
        self.log = None

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is not None and self.log_path.exists():
            print("app log:\n" + self.log_path.read_text()[-4000:], file=sys.stderr)
        for p in reversed(self.processes):
            if p is self.launcher:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if p.poll() is None:
                p.kill()
            p.wait()
        if self.log:
            self.log.close()
        return False

    def spawn(self, argv, **kwargs):
        p = subprocess.Popen(argv, **kwargs)
        self.processes.append(p)
        return p

    def start_accessibility_bus(self):
        # Its launcher starts a dbus-daemon of its own; all of them in one process group,
        # killed together at the end, and none holding our output open.
        self.launcher = self.spawn([str(LAUNCHER), "--launch-immediately"], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(1)

    def start_app(self, argv, env):
        # Now and then (about one start in five here) the app's first connection to a fresh
        # Xvfb is refused while the accessibility bus starts ("could not connect to
        # display"); the window never opened then, so starting again is the same first run.
        for attempt in range(3):
            self.log = open(self.log_path, "w")
            app = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)
            try:
                app.wait(timeout=3)
            except subprocess.TimeoutExpired:
                break
            self.log.close()
            self.log = None
            if "could not connect to display" not in self.log_path.read_text():
                raise AssertionError(f"the app ended at once ({app.returncode})")
            print(f"the X server refused the app's connection (start {attempt + 1}); starting it again",
                  file=sys.stderr)
            time.sleep(1)
        self.processes.append(app)
        self.app = app
        return app

    def window(self, timeout=60):
        """The app on the accessibility bus."""
        import pyatspi

        def application():
            desktop = pyatspi.Registry.getDesktop(0)
            for i in range(desktop.childCount):
                child = desktop.getChildAtIndex(i)
                if child is not None and child.name == "Powerhouse":
                    return child
            return None

        return wait_for("the app on the accessibility bus", application, timeout)

    def stop_app(self):
        """SIGTERM, as a desktop session ends it, and its exit awaited."""
        self.app.send_signal(signal.SIGTERM)
        self.app.wait(timeout=30)
        if self.log:
            self.log.close()
            self.log = None
