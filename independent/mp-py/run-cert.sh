#!/bin/bash
# Sets up two namespaces joined by a data veth (no IPs, jumbo MTU) and a control
# veth (TCP to the agent), runs mpnic in the IUT namespace and `metaroce run`
# in the harness namespace, then tears everything down.
# usage: run-cert.sh [-k FILTER]... [extra metaroce run args]
# IUT=ref runs metaroce-ref serve instead of mpnic (a baseline on the same bed)
# SERVE_ARGS: extra arguments for the IUT's `serve` (word-split), e.g.
#   SERVE_ARGS="--timers $HERE/timers/x50.yaml" ./run-cert.sh -k mp           (mpnic)
#   IUT=ref SERVE_ARGS="--mp-timers FILE" ./run-cert.sh -k mp                 (metaroce-ref)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# The binaries: BIN if given, else the workspace's release build, else its debug build.
bin_of() {
  if [ -n "${BIN:-}" ]; then echo "$BIN/$1"; return; fi
  for p in "$REPO/target/release/$1" "$REPO/target/debug/$1"; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  echo "missing binary $1: cargo build -p metaroce-conformance -p metaroce-ref (or set BIN)" >&2; exit 2
}
PY=${PY:-${METAROCE_PYTHON:-$REPO/.venv/bin/python}}
METAROCE=$(bin_of metaroce) || exit 2
METAROCE_REF=$(bin_of metaroce-ref 2>/dev/null)
TMO=${TMO:-900}
ID=$$
NH=mph$ID; NI=mpi$ID
OUT=${OUT:-$HERE/runs/cert-$(date +%H%M%S)}
mkdir -p "$OUT"
cleanup() {
  [ -n "${APID:-}" ] && kill "$APID" 2>/dev/null; wait "${APID:-}" 2>/dev/null
  [ -n "${CPID:-}" ] && { pkill -P "$CPID" 2>/dev/null; kill "$CPID" 2>/dev/null; wait "$CPID" 2>/dev/null; }
  ip netns del $NH 2>/dev/null; ip netns del $NI 2>/dev/null
}
trap cleanup EXIT INT TERM
ip netns add $NH && ip netns add $NI || exit 2
ip link add dh$ID type veth peer name di$ID
ip link add ch$ID type veth peer name ci$ID
ip link set dh$ID netns $NH; ip link set ch$ID netns $NH
ip link set di$ID netns $NI; ip link set ci$ID netns $NI
for ns in $NH $NI; do ip -n $ns link set lo up; done
ip -n $NH link set dh$ID mtu 9000 up; ip -n $NI link set di$ID mtu 9000 up
ip -n $NH addr add 192.168.250.1/30 dev ch$ID; ip -n $NH link set ch$ID up
ip -n $NI addr add 192.168.250.2/30 dev ci$ID; ip -n $NI link set ci$ID up
for ns in $NH $NI; do ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
if [ "${IUT:-mpnic}" = ref ]; then
  # baseline: the reference transport on the same test bed (IUT=ref)
  [ -n "$METAROCE_REF" ] || { echo "IUT=ref needs metaroce-ref" >&2; exit 2; }
  ip netns exec $NI $METAROCE_REF serve --iface di$ID --ip 10.0.0.2 \
     --listen 192.168.250.2:7471 ${SERVE_ARGS:-} >"$OUT/agent.log" 2>&1 &
else
  ip netns exec $NI env PYTHONPATH=$HERE $PY -m mpnic serve --iface di$ID --ip 10.0.0.2 \
     --listen 192.168.250.2:7471 ${SERVE_ARGS:-} >"$OUT/agent.log" 2>&1 &
fi
APID=$!
sleep 0.3; kill -0 $APID 2>/dev/null || { cat "$OUT/agent.log" >&2; echo "serve exited" >&2; exit 2; }
if [ -n "${CAP:-}" ]; then
  ip netns exec $NI tshark -q -i di$ID -i ci$ID -w "$OUT/iut.pcap" >/dev/null 2>&1 & CPID=$!
  sleep 1
fi
for i in $(seq 50); do ip netns exec $NH bash -c "exec 3<>/dev/tcp/192.168.250.2/7471" 2>/dev/null && break; sleep 0.1; done
timeout $TMO ip netns exec $NH $METAROCE run --iut raw:dh$ID --agent 192.168.250.2:7471 \
   --ip 10.0.0.1 --report-dir "$OUT" "$@" 2>&1 | tee "$OUT/run.txt"
RC=${PIPESTATUS[0]}
echo "rc=$RC report: $OUT"
exit "$RC"
