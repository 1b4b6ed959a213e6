#!/bin/sh
# Takes the book's screenshot of the console (docs/src/console.png): the
# demo runs served by `reel serve`, the run page of `demo-search` (a call
# that dispatches others) in headless chromium (Debian's `chromium`).
#
#   REEL=target/debug/reel sh docs/src/console-screenshot.sh
set -eu
REEL=${REEL:-reel}
CHROMIUM=${CHROMIUM:-chromium}
OUT=${1:-$(dirname "$0")/console.png}
tmp=$(mktemp -d)
"$REEL" demo --archive "$tmp/archive" >/dev/null
"$REEL" serve --archive "$tmp/archive" --listen 127.0.0.1:0 >"$tmp/served" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do
  grep -q http "$tmp/served" 2>/dev/null && break
  sleep 0.1
done
url=$(grep -o 'http://[^ ]*' "$tmp/served" | head -1)
"$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$tmp/profile" --window-size=1280,1100 \
  --screenshot="$tmp/console.png" "${url}runs/demo-search" >/dev/null 2>&1
cp "$tmp/console.png" "$OUT"
echo "wrote $OUT (${url}runs/demo-search)"
