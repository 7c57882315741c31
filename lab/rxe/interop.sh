#!/bin/bash
# interop.sh -- the reference transport against Linux soft-RoCE (rdma_rxe),
# in two parts, each with one QEMU guest behind TAP tap-iop in namespace
# mr-iop-<pid>:
#
#  1. pingpong: rdma-core's ibv_rc_pingpong server on rxe in the guest,
#     `metaroce-ref pingpong` its client on the host side (SEND only).
#  2. agents: metaroce-agent-verbs on rxe0 in the guest (as certify.sh),
#     `metaroce-ref serve --iface tap-iop` in the namespace (the reference
#     owns 10.77.0.2 / 02:00:00:00:00:02 as raw frames on the TAP), and
#     `metaroce interop` between the two: SEND, SEND with immediate, WRITE,
#     WRITE with immediate, READ, compare-swap (equal, not equal) and
#     fetch-add, reference→rxe and rxe→reference, data checked through
#     both agents. Then `metaroce check` on the guest NIC's capture.
#
# Usage: lab/rxe/interop.sh WORKDIR [OUTDIR]
#   WORKDIR  the guest (built here by mkvm.sh when missing; reused after)
#   OUTDIR   captures, matrices, logs, versions (default WORKDIR/interop)
# Knobs (environment): PMTU (1024), SIZES (metaroce interop's default:
#   0,1,PMTU-1,PMTU+1,65536), OPS (all), PINGPONG=0 (skip part 1),
#   SIZE (4096) / ITERS (20) of the pingpong, TMO (guest lifetime, 300 s),
#   LOSS (percent of the guest's egress frames netem drops in part 2; the
#   capture is then judged --lossy),
#   BUILD=0 (use the binaries already in target/release).
#
# One command: installs libibverbs-dev (the verbs agent's build dependency)
# and what mkvm.sh installs, builds (release) metaroce-ref, metaroce and
# metaroce-agent-verbs (feature verbs), runs both parts, and stops the guest
# and deletes the namespace on every exit path. Network rule: the TAP lives
# only in the namespace; the guest's only NIC is that TAP; 10.77.0.0/24
# exists only there. Every process runs under `timeout`.
#
# Exit status: 0 when the pingpong passes and every interop cell is PASS;
# 1 a FAIL; 2 an ERROR of metaroce interop; 3 a lab failure (build, guest,
# agent did not come up, an agent unreachable, the run timed out).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 WORKDIR [OUTDIR]" >&2; exit 3; }
[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (apt-get, netns, TAP)" >&2; exit 3; }
W=$1
H=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$H/../.." && pwd)
SIZE=${SIZE:-4096}; ITERS=${ITERS:-20}; PMTU=${PMTU:-1024}; TMO=${TMO:-300}
NS=mr-iop-$$; TAP=tap-iop
VMIP=10.77.0.1; TAPIP=10.77.0.100; VMMAC=52:54:00:00:00:0a
HIP=10.77.0.2; HMAC=02:00:00:00:00:02; PORT=7471; REFPORT=7472
LINK_MTU=9000
T0=$(date +%s)
. "$H/lib.sh"
step() { printf '== %s (%ds)\n' "$*" "$(( $(date +%s) - T0 ))"; }

step "packages and guest (mkvm.sh)"
if ! dpkg-query -W -f='${Status}' libibverbs-dev 2>/dev/null | grep -q 'install ok installed'; then
  timeout 600 apt-get update -qq && timeout 900 apt-get install -y -qq --no-install-recommends libibverbs-dev >/dev/null \
    || { echo "$0: cannot install libibverbs-dev" >&2; exit 3; }
fi
"$H/mkvm.sh" "$W" >/dev/null || exit 3
W=$(cd "$W" && pwd)
OUT=${2:-$W/interop}
mkdir -p "$OUT" "$W/share"; OUT=$(cd "$OUT" && pwd)

if [ "${BUILD:-1}" = 1 ]; then
  step "build (release): metaroce-ref, metaroce, metaroce-agent-verbs --features verbs"
  (cd "$ROOT" && cargo build -q --release -p metaroce-agent-verbs --features verbs \
     && cargo build -q --release -p metaroce-ref -p metaroce-conformance) || exit 3
fi
BIN=$ROOT/target/release/metaroce-ref
METAROCE=$ROOT/target/release/metaroce
AGENT=$ROOT/target/release/metaroce-agent-verbs
for f in "$BIN" "$METAROCE" "$AGENT"; do [ -x "$f" ] || { echo "$0: missing $f" >&2; exit 3; }; done

VM=; REF=
stop_vm() {
  touch "$W/share/agent.stop" 2>/dev/null
  if [ -n "$VM" ]; then
    for _ in $(seq 1 30); do kill -0 "$VM" 2>/dev/null || break; sleep 1; done
    kill "$VM" 2>/dev/null; wait "$VM" 2>/dev/null
  fi
  VM=
}
cleanup() {
  [ -n "$REF" ] && kill "$REF" 2>/dev/null && wait "$REF" 2>/dev/null
  stop_vm
  ip netns del "$NS" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "namespace $NS, TAP $TAP"
ip netns add "$NS" || exit 3
ip netns exec "$NS" ip link set lo up
ip netns exec "$NS" ip tuntap add dev $TAP mode tap || exit 3
ip netns exec "$NS" ip addr add "$TAPIP/24" dev $TAP
ip netns exec "$NS" ip link set $TAP mtu $LINK_MTU up

boot() { # SCRIPT PCAP LOG
  ip netns exec "$NS" timeout $((TMO + 120)) "$H/vm.sh" "$W" "$1" \
    -netdev tap,id=n0,ifname=$TAP,script=no,downscript=no,vnet_hdr=off \
    -device virtio-net-pci,netdev=n0,mac=$VMMAC \
    -object filter-dump,id=f0,netdev=n0,file="$2" > "$3" 2>&1 &
  VM=$!
}

# ---- part 1: ibv_rc_pingpong against metaroce-ref pingpong ----
PP=SKIPPED
if [ "${PINGPONG:-1}" = 1 ]; then
  step "part 1: ibv_rc_pingpong (rxe) against metaroce-ref pingpong: size $SIZE, $ITERS iterations, PMTU $PMTU"
  rm -f "$OUT/rxe_pingpong.pcap" "$W/share/pingpong.status"
  cp "$H/pingpong_srv.sh" "$W/share/"
  printf 'SIZE=%s\nITERS=%s\nMTU=%s\nTMO=%s\nMYIP=%s\n' "$SIZE" "$ITERS" "$PMTU" 120 "$VMIP" > "$W/share/pingpong.env"
  boot pingpong_srv.sh "$OUT/rxe_pingpong.pcap" "$OUT/pingpong_guest.log"
  # The client retries the TCP connection until the guest's server listens.
  ip netns exec "$NS" timeout 240 "$BIN" pingpong --iface $TAP --ip $TAPIP \
    --peer-ip $VMIP --peer-mac $VMMAC --connect $VMIP --size "$SIZE" --iters "$ITERS" \
    --pmtu "$PMTU" --timeout-secs 200 > "$OUT/pingpong_client.log" 2>&1
  CRC=$?
  for _ in $(seq 1 60); do kill -0 "$VM" 2>/dev/null || break; sleep 1; done
  stop_vm
  GRC=$(cat "$W/share/pingpong.status" 2>/dev/null || echo none)
  PP=FAIL
  if [ "$CRC" = 0 ] && [ "$GRC" = 0 ] && grep -aq "GUEST pp: .* bytes in .* seconds" "$OUT/pingpong_guest.log" \
     && grep -q '"ok":true' "$OUT/pingpong_client.log"; then PP=PASS; fi
  grep -a '^GUEST pp:' "$OUT/pingpong_guest.log" | tr -d '\r' | tail -n 2
  step "part 1: $PP (client exit $CRC, guest pingpong exit $GRC)"
fi

# ---- part 2: metaroce interop, reference agent against the verbs agent on rxe ----
step "part 2: guest with metaroce-agent-verbs on rxe0 (MTU $LINK_MTU)"
rm -f "$W/share/agent."* "$OUT/rxe_interop.pcap"
cp "$H/agent_srv.sh" "$W/share/"
# The guest sees the host's root read-only, but its /tmp is its own (the
# share is mounted there): an agent built under /tmp (a CI clone) would be
# invisible, so the guest runs a copy from the share.
cp "$AGENT" "$W/share/metaroce-agent-verbs" || exit 3
printf 'MYIP=%s\nPORT=%s\nTMO=%s\nAGENT=%s\nLINK_MTU=%s\nLOSS=%s\n' "$VMIP" "$PORT" "$TMO" /tmp/share/metaroce-agent-verbs "$LINK_MTU" "${LOSS:-}" > "$W/share/agent.env"
boot agent_srv.sh "$OUT/rxe_interop.pcap" "$OUT/agent_guest.log"
ip netns exec "$NS" timeout $((TMO + 60)) "$BIN" serve --iface $TAP --ip $HIP --mac $HMAC \
  --listen 127.0.0.1:$REFPORT > "$OUT/reference_agent.log" 2>&1 &
REF=$!
wait_for_agent "$NS" "$VM" $VMIP $PORT "$OUT/agent_guest.log" "$W/share" || exit 3
kill -0 "$REF" 2>/dev/null || { echo "$0: metaroce-ref serve exited:" >&2; cat "$OUT/reference_agent.log" >&2; exit 3; }
step "part 2: metaroce interop --a reference (127.0.0.1:$REFPORT) --b rxe ($VMIP:$PORT), PMTU $PMTU"
ARGS=(--a 127.0.0.1:$REFPORT --b $VMIP:$PORT --pmtu "$PMTU" --wait-ms 30000
      --json "$OUT/interop.json" --markdown "$OUT/interop.md")
[ -n "${SIZES:-}" ] && ARGS+=(--sizes "$SIZES")
[ -n "${OPS:-}" ] && ARGS+=(--ops "$OPS")
ip netns exec "$NS" timeout 900 "$METAROCE" interop "${ARGS[@]}" > "$OUT/interop.txt" 2> "$OUT/interop.stderr"
IRC=$?
cat "$OUT/interop.txt"
[ $IRC -ge 2 ] && tail -n 5 "$OUT/interop.stderr"
step "part 2: metaroce interop exit $IRC"
kill "$REF" 2>/dev/null; wait "$REF" 2>/dev/null; REF=
stop_vm
ip netns del "$NS"
cp "$W/share/agent.log" "$OUT/verbs_agent.log" 2>/dev/null
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "guest kernel: $(cat "$W/share/agent.kver" 2>/dev/null)"
  echo "rdma-core: $(cat "$W/share/agent.rdmacore" 2>/dev/null)"
  echo "qemu: $(qemu-system-x86_64 --version | head -n 1)"
  echo "metaroce: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
  echo "rxe hw_counters after part 2: $(cat "$W/share/agent.counters" 2>/dev/null)"
} > "$OUT/versions.txt"
cat "$OUT/versions.txt"

for cap in rxe_pingpong rxe_interop; do
  [ -s "$OUT/$cap.pcap" ] || continue
  LOSSY=; [ $cap = rxe_interop ] && [ -n "${LOSS:-}" ] && LOSSY=--lossy
  timeout 300 "$METAROCE" check --pmtu "$PMTU" $LOSSY "$OUT/$cap.pcap" > "$OUT/$cap.check.txt" 2>&1
  echo "== metaroce check --pmtu $PMTU $LOSSY $cap.pcap: exit $? ($(stat -c %s "$OUT/$cap.pcap") bytes); tail:"
  tail -n 8 "$OUT/$cap.check.txt"
done

# metaroce interop: 0 PASS, 1 FAIL, 2 ERROR; 4 (agent unreachable, bad
# arguments) and 124 (timeout) are failures of the lab.
case $IRC in 0|1|2) RC=$IRC ;; *) RC=3 ;; esac
[ "$PP" = FAIL ] && [ $RC = 0 ] && RC=1
step "done: pingpong $PP, interop exit $IRC; exit $RC; outputs in $OUT"
exit $RC
