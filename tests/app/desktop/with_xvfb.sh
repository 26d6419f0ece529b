#!/bin/sh
# with_xvfb.sh COMMAND...: runs COMMAND with DISPLAY set to an Xvfb of its own, which picks a
# free display number itself (-displayfd), so tests that start X servers at the same time
# never race for one (xvfb-run -a can hand two of them :99). Exits 77 (skip) without Xvfb.
command -v Xvfb > /dev/null || { echo "Xvfb is not installed (package xvfb)"; exit 77; }
dir=$(mktemp -d)
Xvfb -displayfd 3 -screen 0 1280x800x24 -nolisten tcp 3> "$dir/display" > /dev/null 2> /dev/null &
xvfb=$!
tries=0
while [ ! -s "$dir/display" ] && [ "$tries" -lt 200 ]; do
    sleep 0.05
    tries=$((tries + 1))
done
if [ ! -s "$dir/display" ]; then
    echo "Xvfb did not start" >&2
    kill "$xvfb" 2> /dev/null
    rm -rf "$dir"
    exit 1
fi
DISPLAY=":$(cat "$dir/display")"
export DISPLAY
status=0
"$@" || status=$?
kill "$xvfb" 2> /dev/null
wait "$xvfb" 2> /dev/null
rm -rf "$dir"
exit "$status"
