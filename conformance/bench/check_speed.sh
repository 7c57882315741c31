#!/usr/bin/env bash
# The `metaroce check` speed benchmark, side by side in one run, on two
# captures made by examples/write_capture.rs (every frame with a valid ICRC):
#
#   write4k   4 KiB-payload RC WRITEs (16-packet messages, PMTU 4096) on 8 QPs
#             with their ACKs: the byte rate matters
#   send256   256-byte RC SEND Only requests on 8 QPs, each ACKed: the
#             per-packet cost matters
#
# On each capture, interleaved RUNS times after one warm-up read of the file:
#
#   metaroce check --threads 1          full ICRC, per-packet and conversation checks, one thread
#   metaroce check --threads N          the same on N threads in all (default: the cores)
#   tshark -r FILE -T fields -e infiniband.bth.psn   decodes BTH, judges nothing
#   crc32fast over the same frame bytes  examples/crc_baseline.rs (in memory, one hash per frame)
#
# The check must find nothing (exit 0) and tshark must print one line per
# frame, or the run fails. The table gives medians of wall time and of CPU
# time (user + system of the process, all threads; crc32fast's is its
# thread's CPU time: the machine may be shared) and the ratios the targets
# name (issue #6):
#   packet rate  metaroce / tshark     (target >= 50)
#   byte rate    metaroce / crc32fast  (target >= 0.5, on write4k)
#
# Usage: conformance/bench/check_speed.sh [BYTES] [RUNS] [DIR] [SMALL_BYTES] [THREADS]
#   BYTES        size of the write4k capture (default 1000000000)
#   RUNS         runs per tool (default 5)
#   DIR          where the captures go (default ${TMPDIR:-/tmp}); deleted at the end
#   SMALL_BYTES  size of the send256 capture (default 200000000; 0 skips it)
#   THREADS      N of the multi-threaded check (default: nproc)
# Bounded: per capture, RUNS x (two checks + one tshark + one CRC pass).
set -euo pipefail

BYTES=${1:-1000000000}
RUNS=${2:-5}
DIR=${3:-${TMPDIR:-/tmp}}
SMALL_BYTES=${4:-200000000}
THREADS=${5:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TMP="$DIR/metaroce-check-speed-$$"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

command -v tshark >/dev/null || { echo "check_speed: tshark not found" >&2; exit 2; }
(cd "$ROOT" && cargo build --release -q -p metaroce-conformance \
    --bin metaroce --example write_capture --example crc_baseline)
BIN="$ROOT/target/release"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# bench KIND BYTES: prints the table of one capture
bench() {
    local kind=$1 bytes=$2 file="$TMP/$1.pcap"
    "$BIN/examples/write_capture" "$file" "$bytes" 8 "$kind" 2>/dev/null
    cat "$file" >/dev/null # warm the page cache
    local frames frame_bytes
    # frames and frame bytes (what crc32fast hashes) from the baseline's first pass
    read -r _ frames frame_bytes _ _ _ < <("$BIN/examples/crc_baseline" "$file" 1)
    : >"$TMP/c1" ; : >"$TMP/cn" ; : >"$TMP/ts" ; : >"$TMP/crc"
    for _ in $(seq "$RUNS"); do
        for t in 1 "$THREADS"; do
            local dest="$TMP/c1"
            [ "$t" = 1 ] || dest="$TMP/cn"
            # wall user sys
            /usr/bin/time -f "%e %U %S" -o "$TMP/t" "$BIN/metaroce" check --pmtu 4096 --no-progress \
                --threads "$t" "$file" >"$TMP/out" \
                || { echo "check_speed: metaroce check found something or failed:" >&2; tail -20 "$TMP/out" >&2; exit 1; }
            cat "$TMP/t" >>"$dest"
        done
        /usr/bin/time -f "%e %U %S" -o "$TMP/t" tshark -r "$file" -T fields -e infiniband.bth.psn >"$TMP/out" 2>/dev/null
        local lines
        lines=$(grep -c . "$TMP/out" || true)
        [ "$lines" = "$frames" ] || { echo "check_speed: tshark printed $lines PSNs for $frames frames" >&2; exit 1; }
        cat "$TMP/t" >>"$TMP/ts"
        "$BIN/examples/crc_baseline" "$file" 1 | awk '{print $4, ($6 == "-" ? $4 : $6)}' >>"$TMP/crc"
    done
    rm -f "$file"
    local w1 c1 wn cn tw tc kw kc
    w1=$(awk '{print $1}' "$TMP/c1" | median); c1=$(awk '{print $2+$3}' "$TMP/c1" | median)
    wn=$(awk '{print $1}' "$TMP/cn" | median); cn=$(awk '{print $2+$3}' "$TMP/cn" | median)
    tw=$(awk '{print $1}' "$TMP/ts" | median); tc=$(awk '{print $2+$3}' "$TMP/ts" | median)
    kw=$(awk '{print $1}' "$TMP/crc" | median); kc=$(awk '{print $2}' "$TMP/crc" | median)
    awk -v K="$kind" -v F="$frames" -v B="$frame_bytes" -v runs="$RUNS" -v N="$THREADS" \
        -v w1="$w1" -v c1="$c1" -v wn="$wn" -v cn="$cn" -v tw="$tw" -v tc="$tc" -v kw="$kw" -v kc="$kc" '
    function row(name, w, c, base) {
        printf "| %s | %.3f | %.3f | %.2f M / %.2f M | %.0f / %.0f |", name, w, c, F/w/1e6, F/c/1e6, B/w/1e6, B/c/1e6
        if (base) printf " %.1f / %.1f | %.2f / %.2f |\n", tw/w, tc/c, kw/w, kc/c
        else printf " | |\n"
    }
    BEGIN {
        printf "capture %s: %d frames, %.0f MB of frame bytes, %d runs, medians\n\n", K, F, B/1e6, runs
        printf "| tool | wall s | CPU s | packets/s (wall / CPU) | MB/s (wall / CPU) | x tshark packet rate (wall / CPU) | x crc32fast byte rate (wall / CPU) |\n"
        printf "|---|---|---|---|---|---|---|\n"
        row("metaroce check --threads 1", w1, c1, 1)
        row("metaroce check --threads " N, wn, cn, 1)
        row("tshark -T fields -e infiniband.bth.psn", tw, tc, 0)
        row("crc32fast over the frame bytes (in memory)", kw, kc, 0)
        printf "\n"
    }'
}

bench write4k "$BYTES"
[ "$SMALL_BYTES" = 0 ] || bench send256 "$SMALL_BYTES"
echo "targets: packet rate >= 50 x tshark; byte rate >= 0.5 x crc32fast (write4k)"
