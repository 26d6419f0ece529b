#!/bin/sh
# The desktop app's keyring tests (desktop_remote_test.cpp's KeyStore.*, desktop_engines_test.cpp's
# EnginesWithKeys.*, desktop_hub_test.cpp's Hugging Face token): once with the D-Bus
# session bus pointing nowhere (the clear "no system keyring" message), once inside a real
# Secret Service: a private D-Bus session (dbus-run-session) with gnome-keyring-daemon
# unlocked with an empty password (one empty line on its stdin; no prompt, no display). Exits 77 (skipped) when those programs are missing.
#   keyring_test.sh DESKTOP_TESTS
set -eu
tests="$1"
DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/powerhouse-bus POWERHOUSE_KEYRING_TEST=none \
    "$tests" --gtest_filter='KeyStore.SaysSoClearlyWhenNoKeyringIsReachable:HubControllerTest.TheTokenLivesInTheKeyring'
if ! command -v dbus-run-session >/dev/null || ! command -v gnome-keyring-daemon >/dev/null; then
    echo "skipped: no dbus-run-session or gnome-keyring-daemon (install dbus-daemon gnome-keyring)"
    exit 77
fi
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
# gnome-keyring keeps its keyrings under $HOME/.local/share/keyrings: a fresh one per run.
HOME="$home" XDG_DATA_HOME="$home/data" XDG_RUNTIME_DIR="$home" dbus-run-session -- sh -c '
    echo | gnome-keyring-daemon --unlock --components=secrets >/dev/null || exit 77
    POWERHOUSE_KEYRING_TEST=secret-service "$0" --gtest_filter="KeyStore.StoresAndReadsBackAKeyInTheSecretService:EnginesWithKeys.*:HubControllerTest.TheTokenLivesInTheKeyring"
' "$tests"
