#!/bin/bash
# check.sh -- summarise captures and check them with the project's decoder.
#
# Usage: lab/rxe/check.sh [--markdown] PCAP...
#
# For each capture prints: size, frames (capinfos), RoCE opcodes (tshark's
# infiniband dissector), and from `metaroce decode --format jsonl`: frames,
# RoCE frames, frames with a non-null "error" (split RoCE / other), and RoCE
# frames with "icrc_valid": false. Needs tshark, jq and a built decoder
# (cargo build --release -p metaroce-conformance); METAROCE overrides its path.
set -euo pipefail
H=$(cd "$(dirname "$0")" && pwd)
MD=0; [ "${1:-}" = --markdown ] && { MD=1; shift; }
[ $# -ge 1 ] || { echo "usage: $0 [--markdown] PCAP..." >&2; exit 2; }
BIN=${METAROCE:-$H/../../target/release/metaroce}
[ -x "$BIN" ] || { echo "$0: $BIN missing: cargo build --release -p metaroce-conformance" >&2; exit 1; }
for c in tshark jq capinfos; do command -v $c >/dev/null || { echo "$0: $c missing" >&2; exit 1; }; done
[ $MD = 1 ] && { echo "| capture | bytes | frames | RoCE | error (RoCE/other) | icrc_valid=false | opcodes (tshark: count×opcode) |"; echo "|---|---|---|---|---|---|---|"; }
BAD=0
for f in "$@"; do
  J=$(mktemp); trap 'rm -f "$J"' EXIT
  timeout 300 "$BIN" decode --format jsonl "$f" > "$J"
  read -r fr roce err_roce err_other icrc_bad < <(jq -s -r '[length, (map(select(.roce))|length),
      (map(select(.roce and .error!=null))|length), (map(select((.roce|not) and .error!=null))|length),
      (map(select(.icrc_valid==false))|length)] | @tsv' "$J")
  ops=$(tshark -r "$f" -Y infiniband -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c | awk '{printf "%s%s×%s", (NR>1?", ":""), $1, $2}')
  tf=$(capinfos -c -M "$f" | awk -F: '/Number of packets/{gsub(/ /,"",$2); print $2}')
  sz=$(stat -c %s "$f")
  if [ $MD = 1 ]; then
    echo "| $(basename "$f") | $sz | $tf | $roce | $err_roce/$err_other | $icrc_bad | $ops |"
  else
    echo "$(basename "$f"): bytes=$sz frames(capinfos)=$tf frames(decoder)=$fr roce=$roce error_roce=$err_roce error_other=$err_other icrc_false=$icrc_bad"
    echo "   opcodes: $ops"
    jq -r 'select(.error!=null) | .error' "$J" | sort | uniq -c | sed 's/^/   error: /'
    jq -c 'select(.icrc_valid==false) | {frame, len, opcode: .bth.opcode_name, psn: .bth.psn, icrc: .icrc}' "$J" | sed 's/^/   icrc false: /'
  fi
  [ "$err_roce" = 0 ] && [ "$icrc_bad" = 0 ] || BAD=1
  rm -f "$J"
done
exit $BAD
