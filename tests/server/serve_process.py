"""Starting `powerhouse-cli serve` for the server tests (standard library only, so that the
raw-socket corpus needs no client package)."""
import subprocess


def start_serve(cli, model, *extra):
    """A `serve` process on a free port of 127.0.0.1, once it accepts: (process, model id, base URL)."""
    proc = subprocess.Popen([cli, "serve", "-m", model, "--port", "0", "-t", "2", "--ctx", "2048", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "serving MODEL on http://127.0.0.1:PORT"
    if not line.startswith("serving "):
        proc.kill()
        raise RuntimeError(f"serve did not start: {line!r} {proc.stderr.read()}")
    return proc, line.split()[1], line.split()[-1]
