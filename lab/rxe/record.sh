#!/bin/bash
# record.sh -- record rxe<->rxe RoCEv2 conversations as small pcap test captures.
#
# Usage: lab/rxe/record.sh WORKDIR OUTDIR [SCENARIO...]
#        lab/rxe/record.sh --list
#
#   WORKDIR  built by lab/rxe/mkvm.sh WORKDIR (vmlinuz, initrd.gz, share/)
#   OUTDIR   where SCENARIO.pcap files and hw_counters.txt go
#            (the project keeps them in vectors/captures/rxe/)
#   SCENARIO names from --list; default: all of them, clean ones first.
#
# For every scenario two QEMU guests (A = server 10.77.0.1, B = client
# 10.77.0.2) are booted, joined by a QEMU socket netdev on 127.0.0.1:PORT
# (nothing else: no TAP, no user-mode networking, no route out of the guests),
# and QEMU's filter-dump writes every frame crossing guest A's NIC to
# OUTDIR/SCENARIO.pcap. The guests are powered off after each scenario, so each
# capture holds exactly one scenario (plus the guests' own boot-time IPv6/ARP
# chatter and perftest's TCP exchange of QP data, which are left in).
# In the *_loss10 scenarios guest B drops 10% of the frames it sends (netem),
# before they reach the wire (in *_loss10_both guest A does too): the capture
# shows what crossed the link.
#
# Environment: PORT (default: a free port in 20000-39999), VM_MEM (MiB per
# guest, default 1024), MAX_KB (warn when a capture is larger, default 300).
# At most two guests run at any time. Captures are never trimmed.
set -euo pipefail

H=$(cd "$(dirname "$0")" && pwd)

# name | loss % at B | per-command timeout (s) | command (server form; the client appends the server IP) | loss % at A
SCENARIOS=(
  "rc_pingpong_clean||90|ibv_rc_pingpong -d rxe0 -g 1 -n 3 -s 3000"
  "write_bw_clean||90|ib_write_bw -d rxe0 -x 1 -n 5 -s 3000 -F"
  "read_bw_clean||90|ib_read_bw -d rxe0 -x 1 -n 5 -s 3000 -F"
  "send_bw_clean||90|ib_send_bw -d rxe0 -x 1 -n 5 -s 3000 -F"
  "atomic_cas_clean||90|ib_atomic_bw -d rxe0 -x 1 -n 5 -A CMP_AND_SWAP -F"
  "atomic_faa_clean||90|ib_atomic_bw -d rxe0 -x 1 -n 5 -A FETCH_AND_ADD -F"
  "write_bw_loss10|10|150|ib_write_bw -d rxe0 -x 1 -n 40 -s 3000 -F"
  "send_bw_loss10|10|150|ib_send_bw -d rxe0 -x 1 -n 20 -s 3000 -F"
  "read_bw_loss10|10|150|ib_read_bw -d rxe0 -x 1 -n 20 -s 3000 -F"
  "read_bw_loss10_both|10|150|ib_read_bw -d rxe0 -x 1 -n 20 -s 3000 -F|10"
  "rc_pingpong_loss10|10|150|ibv_rc_pingpong -d rxe0 -g 1 -n 5 -s 3000"
  "atomic_cas_loss10|10|150|ib_atomic_bw -d rxe0 -x 1 -n 20 -A CMP_AND_SWAP -F"
  "atomic_faa_loss10|10|150|ib_atomic_bw -d rxe0 -x 1 -n 20 -A FETCH_AND_ADD -F"
)

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
if [ "${1:-}" = --list ]; then
  for s in "${SCENARIOS[@]}"; do IFS='|' read -r n l t c la <<< "$s"; printf '%-20s lossB=%-3s lossA=%-3s %s\n' "$n" "${l:-0}" "${la:-0}" "$c"; done
  exit 0
fi
[ $# -ge 2 ] || usage
W=$(cd "$1" && pwd); OUT=$2; shift 2
for f in vmlinuz initrd.gz; do [ -s "$W/$f" ] || { echo "$0: $W/$f missing: run $H/mkvm.sh $W first" >&2; exit 1; }; done
command -v qemu-system-x86_64 >/dev/null || { echo "$0: qemu-system-x86_64 missing: run $H/mkvm.sh first" >&2; exit 1; }

WANT=("$@")
if [ ${#WANT[@]} -eq 0 ]; then for s in "${SCENARIOS[@]}"; do WANT+=("${s%%|*}"); done; fi
for w in "${WANT[@]}"; do
  printf '%s\n' "${SCENARIOS[@]}" | grep -q "^$w|" || { echo "$0: unknown scenario $w (see --list)" >&2; exit 2; }
done

mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
mkdir -p "$W/share" "$W/logs"
cp "$H/guest.sh" "$W/share/guest.sh"

PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap cleanup EXIT
trap 'echo "$0: interrupted" >&2; exit 130' INT TERM

port_free() { [ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }
pick_port() {
  if [ -n "${PORT:-}" ]; then echo "$PORT"; return; fi
  local p i
  for i in $(seq 1 50); do p=$((20000 + RANDOM % 20000)); port_free "$p" && { echo "$p"; return; }; done
  echo "$0: no free port found" >&2; return 1
}

write_wrapper() {  # RUN ROLE MYIP PEER LOSS TMO CMDS
  {
    printf 'RUN=%q ROLE=%q MYIP=%q PEER=%q LOSS=%q TMO=%q\n' "$1" "$2" "$3" "$4" "$5" "$6"
    printf 'CMDS=%q\n' "$7"
    echo '. /tmp/share/guest.sh'
  } > "$W/share/$1.$2.sh"
}

# record one scenario; returns non-zero if either side failed
record() {
  local name=$1 loss=$2 tmo=$3 cmds=$4 lossa=${5:-}
  local port pcap="$W/logs/$name.pcap" t0=$SECONDS vmtmo=$(( tmo * 2 + 120 ))
  port=$(pick_port)
  rm -f "$pcap" "$W/share/$name".{a,b}.{counters,status}
  write_wrapper "$name" a 10.77.0.1 10.77.0.2 "$lossa" "$tmo" "$cmds"
  write_wrapper "$name" b 10.77.0.2 10.77.0.1 "$loss" "$tmo" "$cmds"
  echo "== $name (loss at B ${loss:-0}%, at A ${lossa:-0}%, 127.0.0.1:$port)"
  timeout "$vmtmo" "$H/vm.sh" "$W" "$name.a.sh" \
    -netdev socket,id=n0,listen=127.0.0.1:"$port" -device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0a,romfile= \
    -object filter-dump,id=f0,netdev=n0,file="$pcap" > "$W/logs/$name.a.log" 2>&1 &
  local pa=$!; PIDS+=("$pa")
  local i
  for i in $(seq 1 50); do port_free "$port" || break; sleep 0.2; done
  port_free "$port" && { echo "$0: guest A did not listen on $port" >&2; cleanup; return 1; }
  timeout "$vmtmo" "$H/vm.sh" "$W" "$name.b.sh" \
    -netdev socket,id=n0,connect=127.0.0.1:"$port" -device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0b,romfile= \
    > "$W/logs/$name.b.log" 2>&1 &
  local pb=$!; PIDS+=("$pb")
  local ra=0 rb=0
  wait "$pb" || rb=$?
  wait "$pa" || ra=$?
  PIDS=()
  local sa sb
  sa=$(cat "$W/share/$name.a.status" 2>/dev/null || echo missing)
  sb=$(cat "$W/share/$name.b.status" 2>/dev/null || echo missing)
  # hw counters: replace this scenario's lines in OUT/hw_counters.txt
  local hc="$OUT/hw_counters.txt"
  touch "$hc"; grep -v "^$name " "$hc" > "$hc.tmp" || true
  echo "$name A(server,10.77.0.1,loss=${lossa:-0}%): $(cat "$W/share/$name.a.counters" 2>/dev/null || echo missing)" >> "$hc.tmp"
  echo "$name B(client,10.77.0.2,loss=${loss:-0}%): $(cat "$W/share/$name.b.counters" 2>/dev/null || echo missing)" >> "$hc.tmp"
  grep -v '^#' "$hc.tmp" | sort > "$hc.body"
  { echo "# rdma_rxe hw_counters (/sys/class/infiniband/rxe0/ports/1/hw_counters) at the end of each scenario, written by lab/rxe/record.sh"
    cat "$hc.body"; } > "$hc"
  rm -f "$hc.tmp" "$hc.body"
  grep -a -h -o 'LAB\[.*' "$W/logs/$name.a.log" "$W/logs/$name.b.log" | grep -E 'exit=|uname|versions' || true
  if [ "$sa" != 0 ] || [ "$sb" != 0 ] || [ ! -s "$pcap" ]; then
    echo "!! $name FAILED (qemu rc A=$ra B=$rb, guest status A=$sa B=$sb); logs in $W/logs/$name.{a,b}.log" >&2
    return 1
  fi
  cp "$pcap" "$OUT/$name.pcap"
  local frames
  frames=$(capinfos -c -M "$OUT/$name.pcap" 2>/dev/null | awk -F: '/Number of packets/{gsub(/ /,"",$2); print $2}')
  echo "   ok in $((SECONDS - t0)) s: $(stat -c %s "$OUT/$name.pcap") bytes, ${frames:-?} frames; opcodes:"
  local sz; sz=$(stat -c %s "$OUT/$name.pcap")
  if [ "$sz" -gt $(( ${MAX_KB:-300} * 1024 )) ]; then
    # rxe retransmits every outstanding packet on each NAK/timeout, so loss runs vary a lot in size.
    echo "   warning: $name.pcap is $sz bytes (> ${MAX_KB:-300} KiB); re-record it if a smaller capture is wanted" >&2
  fi
  if command -v tshark >/dev/null; then
    tshark -r "$OUT/$name.pcap" -Y infiniband -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c | sed 's/^/     /'
  fi
}

FAILED=()
T0=$SECONDS
for w in "${WANT[@]}"; do
  for s in "${SCENARIOS[@]}"; do
    IFS='|' read -r n l t c la <<< "$s"
    [ "$n" = "$w" ] || continue
    record "$n" "$l" "$t" "$c" "$la" || FAILED+=("$n")
  done
done
echo "== done in $((SECONDS - T0)) s; captures in $OUT"
if [ ${#FAILED[@]} -gt 0 ]; then echo "failed: ${FAILED[*]}" >&2; exit 1; fi
