#!/bin/sh
# Screenshots of the HTML certification report and the SPEC page in headless
# Chromium at a laptop width, to look at what a reader sees.
#
#   tools/report-screenshot.sh [OUT_DIR] [WIDTH]
#
# Runs the suite on the built-in reference transport (`metaroce run
# --report-dir`, which writes report.html and spec.html), then writes
# OUT_DIR/report-top-WIDTH.png (the report's head), report-WIDTH.png (its
# requirements table), report-tests-WIDTH.png (every test) and
# spec-WIDTH.png (the SPEC page at MR-MPH-2) (OUT_DIR default
# target/report-screenshot, WIDTH default 1366). Needs chromium
# (apt-get install -y chromium) and `metaroce` on PATH or METAROCE set to it.
set -eu
out=${1:-target/report-screenshot}
width=${2:-1366}
metaroce=${METAROCE:-metaroce}
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chromium" ]; then
    echo "report-screenshot: no chromium on PATH (apt-get install -y chromium)" >&2
    exit 2
fi
mkdir -p "$out"
"$metaroce" run --report-dir "$out" >/dev/null || true  # a failing suite still writes its report
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# Chromium's --screenshot draws the top of a page and ignores a #fragment; a
# wrapper page with an iframe scrolled to the fragment shows that part.
shoot() {
    page=$out/view-$(basename "$2" .png).html
    printf '<!DOCTYPE html><html><body style="margin:0;overflow:hidden"><iframe src="%s" style="display:block;border:0;width:100vw;height:100vh"></iframe></body></html>' \
        "$(basename "$1")$3" > "$page"
    "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --window-size="$width,900" \
        --screenshot="$2" "file://$(cd "$(dirname "$page")" && pwd)/$(basename "$page")" 2>/dev/null
    rm -f "$page"
    echo "$2"
}
shoot "$out/report.html" "$out/report-top-$width.png" ""
shoot "$out/report.html" "$out/report-$width.png" "#requirements"
shoot "$out/report.html" "$out/report-tests-$width.png" "#every-test"
shoot "$out/spec.html" "$out/spec-$width.png" "#MR-MPH-2"
