#!/usr/bin/env bash
# The packages of a build, as a user gets them: CPack makes the .deb and the .tar.gz; the
# .deb is unpacked into a fresh root (dpkg-deb -x: the layout is relocatable) and the
# programs are run from there: powerhouse-cli --version and info on the test model, and the
# desktop app under Xvfb until it has drawn its window and saved a screenshot. Also: every
# package the .deb depends on exists (is installed here), nothing NVIDIA is linked (the CUDA
# runtime is inside the programs; libcuda and NVML are loaded at run time), no RPATH, the
# desktop file and AppStream metainfo validate, and lintian reports no error.
#   package_test.sh BUILD_DIR   (the model: $POWERHOUSE_TEST_MODEL, as scripts/lib.sh sets it)
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
build="$1"
model="$POWERHOUSE_TEST_MODEL"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cpack --config "$build/CPackConfig.cmake" -B "$work/pkg" > "$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack"; }
deb="$(ls "$work"/pkg/*.deb)"
tgz="$(ls "$work"/pkg/*.tar.gz)"
echo "packages: $(basename "$deb") $(basename "$tgz")"
dpkg-deb -I "$deb"

# Every dependency names a package this Debian has (and the test machine installed).
depends="$(dpkg-deb -f "$deb" Depends)"
[ -n "$depends" ] || fail "the .deb declares no dependencies"
IFS=',' read -ra alternatives <<< "$depends"
for alternative in "${alternatives[@]}"; do
    found=0
    IFS='|' read -ra names <<< "$alternative"
    for name in "${names[@]}"; do
        name="$(echo "$name" | sed -e 's/(.*)//' -e 's/[[:space:]]//g')"
        if [ "$(dpkg-query -W -f='${Status}' "$name" 2>/dev/null)" = "install ok installed" ]; then found=1; fi
    done
    [ "$found" = 1 ] || fail "dependency '$alternative' is not an installed package"
done
case "$depends" in *libqt6quick6*) ;; *) fail "no dependency on the Qt Quick runtime: $depends" ;; esac
case "$depends" in *qml6-module-qtquick-controls*) ;; *) fail "no dependency on the QML controls: $depends" ;; esac
case "$depends" in *-dev*) fail "a build-only package in Depends: $depends" ;; esac
recommends="$(dpkg-deb -f "$deb" Recommends)"
case "$recommends" in *libnvidia-ml1*) ;; *) fail "NVML is not recommended" ;; esac

root="$work/root"
dpkg-deb -x "$deb" "$root"
for program in powerhouse powerhouse-cli; do
    binary="$root/usr/bin/$program"
    [ -x "$binary" ] || fail "$program is not in the package"
    readelf -d "$binary" > "$work/dynamic.txt"
    ldd "$binary" > "$work/ldd.txt"
    if grep -qE 'RPATH|RUNPATH' "$work/dynamic.txt"; then fail "$program has an RPATH"; fi
    if grep -qiE 'libcuda|libcudart|libcublas|libnccl|libnvidia-ml' "$work/ldd.txt"; then
        fail "$program links an NVIDIA library: $(grep -iE 'cuda|nccl|nvidia' "$work/ldd.txt")"
    fi
    if grep -q "not found" "$work/ldd.txt"; then fail "$program misses libraries: $(grep 'not found' "$work/ldd.txt")"; fi
    "$binary" --version > "$work/version.txt" 2>&1 || fail "$program --version: $(cat "$work/version.txt")"
    grep -q "^$program [0-9]" "$work/version.txt" || fail "$program --version: $(cat "$work/version.txt")"
    grep -q "^NVIDIA driver: " "$work/version.txt" || fail "$program --version names no driver state"
done
cat "$work/version.txt"

"$root/usr/bin/powerhouse-cli" info "$model" > "$work/info.txt" || fail "installed powerhouse-cli info failed"
grep -q "llama" "$work/info.txt" || fail "info does not name the architecture: $(cat "$work/info.txt")"

HOME="$work/home" QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1280x800x24" \
    "$root/usr/bin/powerhouse" --data-dir "$work/data" "$model" --screenshot "$work/shot.png" \
    > "$work/app.log" 2>&1 || { cat "$work/app.log"; fail "the installed app did not start under Xvfb"; }
[ -s "$work/shot.png" ] || fail "no screenshot from the installed app"
file "$work/shot.png" > "$work/file.txt"
grep -q "PNG image data" "$work/file.txt" || fail "the screenshot is not a PNG"

desktop-file-validate "$root"/usr/share/applications/*.desktop
appstreamcli validate --no-net "$root"/usr/share/metainfo/*.metainfo.xml
[ -f "$root/usr/share/icons/hicolor/256x256/apps/io.github.powerhouse_app.Powerhouse.png" ] || fail "no 256px icon"
[ -f "$root/usr/share/mime/packages/powerhouse-gguf.xml" ] || fail "no GGUF MIME type"

# The .tar.gz holds the same layout.
tar -tzf "$tgz" > "$work/tgz.txt"
grep -q "bin/powerhouse-cli$" "$work/tgz.txt" || fail "powerhouse-cli is not in the .tar.gz"
grep -q "bin/powerhouse$" "$work/tgz.txt" || fail "powerhouse is not in the .tar.gz"

lintian --fail-on error --tag-display-limit 0 "$deb" 2>/dev/null | tee "$work/lintian.txt" || fail "lintian reports errors"
echo "lintian: $(grep -c '^E:' "$work/lintian.txt" || true) errors, $(grep -c '^W:' "$work/lintian.txt" || true) warnings"
echo "package test passed"
