# Shared by the scripts in this folder: package installation and paths. Sourced, not run.

POWERHOUSE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POWERHOUSE_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/powerhouse"
POWERHOUSE_TEST_MODEL="${POWERHOUSE_TEST_MODEL:-$POWERHOUSE_CACHE/test-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
export POWERHOUSE_TEST_MODEL
JOBS="$(nproc 2>/dev/null || echo 2)"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null; then sudo "$@"
    else die "installing packages needs root: run as root or install sudo (missing: $*)"
    fi
}

# ensure_packages PKG...: installs the Debian packages that are not installed yet.
# The Python packages the tests use (the `openai` client, for the API server), pinned, into
# build/pydeps of the checkout (pip --target: no virtual environment, and Debian's
# externally managed Python is left alone). Needs the network only the first time.
# The clients that test the API server: the official `openai` package, and `jsonschema` to
# check that answers constrained by a JSON schema match it.
PYTHON_TEST_PACKAGES=(openai==1.109.1 jsonschema==4.23.0)
ensure_python_test_packages() {
    local target="$POWERHOUSE_ROOT/build/pydeps"
    local stamp="$target/.installed"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${PYTHON_TEST_PACKAGES[*]}" ]; then
        return 0
    fi
    log "Installing Python test packages into $target: ${PYTHON_TEST_PACKAGES[*]}"
    python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip
    mkdir -p "$target"
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --upgrade \
        --target "$target" "${PYTHON_TEST_PACKAGES[@]}" || die "could not install ${PYTHON_TEST_PACKAGES[*]} from PyPI"
    echo "${PYTHON_TEST_PACKAGES[*]}" >"$stamp"
}

ensure_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "Installing Debian packages: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# What every build needs: compiler, CMake, and the libraries of the engine, the CLI,
# app/core (SQLite and SQLiteCpp for the store, libcurl and OpenSSL's libcrypto for downloads)
# and the desktop app (Qt 6 Quick).
BUILD_PACKAGES=(build-essential cmake ninja-build git pkg-config ca-certificates
                python3 python3-pip libfmt-dev nlohmann-json3-dev libcli11-dev
                libsqlite3-dev libsqlitecpp-dev libcurl4-openssl-dev libssl-dev libcpp-httplib-dev
                qt6-base-dev qt6-declarative-dev qml6-module-qtquick qml6-module-qtquick-controls
                qml6-module-qtquick-layouts qml6-module-qtquick-window qml6-module-qtquick-templates
                qml6-module-qtqml-workerscript qml6-module-qtquick-dialogs qt6-qpa-plugins fonts-dejavu-core
                qtkeychain-qt6-dev  # QtKeychain: remote engines' API keys in the system keyring
                libqt6svg6 adwaita-icon-theme)  # the views' icons: Adwaita's SVGs, drawn by Qt's SVG plugin
# What the tests add: GoogleTest, Google Benchmark, clang for libFuzzer and sanitizers.
# The desktop tests: Qt Quick Test's QML module, and Xvfb for a run in a real X window.
TEST_PACKAGES=(libgtest-dev libgmock-dev googletest libbenchmark-dev clang libclang-rt-14-dev
               qml6-module-qttest xvfb xauth
               lintian desktop-file-utils appstream file
               openssl  # openssl: certificates for the remote engines' TLS tests
               gnome-keyring dbus-daemon  # a real Secret Service for the keyring tests
               python3-pyatspi at-spi2-core)  # the first-run test clicks through the accessibility bus

# quiet_build DIR [TARGET...]: builds DIR (incrementally) with the compiler's whole output in
# DIR/build.log, printing only the progress: one line redrawn on a terminal, a line per
# tenth otherwise. On failure, the failed steps and their first errors, and the log's path.
quiet_build() {
    local dir="$1"; shift
    local log_file="$dir/build.log" args=() status=0 tty=0
    local target
    for target in "$@"; do args+=(--target "$target"); done
    [ -t 2 ] && tty=1
    log "Building $(basename "$dir") (incremental; full output in $log_file)"
    cmake --build "$dir" --parallel "$JOBS" "${args[@]}" 2>&1 | tee "$log_file" | awk -v tty="$tty" '
        match($0, /^\[[0-9]+\/[0-9]+\]/) {
            split(substr($0, 2, RLENGTH - 2), n, "/")
            percent = int(100 * n[1] / n[2])
            if (tty) { printf "\r    %d of %d steps (%d%%)", n[1], n[2], percent > "/dev/stderr"; shown = 1 }
            else if (percent >= next_tenth) { printf "    %d of %d steps (%d%%)\n", n[1], n[2], percent > "/dev/stderr"; next_tenth = percent - percent % 10 + 10 }
        }
        END { if (shown) printf "\n" > "/dev/stderr" }' || status=$?
    if [ "$status" -ne 0 ]; then
        {
            echo "The build failed. The failed steps and their first errors:"
            grep -E '^FAILED:|error:|Error [0-9]|CMake Error' "$log_file" | head -40
            echo "The whole output: $log_file"
        } >&2
        return "$status"
    fi
    if grep -q 'no work to do' "$log_file"; then echo "    up to date" >&2; fi
}

# configure_build DIR CMAKE_ARGS...: configures once, then lets the build re-run CMake
# itself when the CMake files change (incremental).
configure_build() {
    local dir="$1"; shift
    if [ ! -f "$dir/build.ninja" ]; then
        log "Configuring $dir"
        (cd "$POWERHOUSE_ROOT" && cmake -B "$dir" "$@")
    fi
}
