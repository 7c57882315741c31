#!/bin/bash
# metaroce interop between metaroce-ref serve (A, ns 1) and mpnic (B, ns 2) over a veth pair.
# usage: run-interop.sh [--loss PCT] [metaroce interop args, e.g. --mp --pmtu 1024]
#   --loss PCT: netem drops PCT % of the frames each end sends on the data veth
#   (both directions; the control link is left alone)
set -u
LOSS=
if [ "${1:-}" = --loss ]; then
  LOSS=${2:?--loss needs a percentage}; shift 2
fi
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
METAROCE_REF=$(bin_of metaroce-ref) || exit 2
TMO=${TMO:-300}
ID=$$
NA=ipa$ID; NB=ipb$ID
OUT=${OUT:-$HERE/runs/interop-$(date +%H%M%S)}
mkdir -p "$OUT"
cleanup() {
  [ -n "${APID:-}" ] && kill "$APID" 2>/dev/null
  [ -n "${BPID:-}" ] && kill "$BPID" 2>/dev/null
  wait 2>/dev/null
  ip netns del $NA 2>/dev/null; ip netns del $NB 2>/dev/null
}
trap cleanup EXIT INT TERM
ip netns add $NA && ip netns add $NB || exit 2
ip link add da$ID type veth peer name db$ID
ip link add ca$ID type veth peer name cb$ID
ip link set da$ID netns $NA; ip link set ca$ID netns $NA
ip link set db$ID netns $NB; ip link set cb$ID netns $NB
for ns in $NA $NB; do ip -n $ns link set lo up; ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
ip -n $NA link set da$ID mtu 9000 up; ip -n $NB link set db$ID mtu 9000 up
ip -n $NA addr add 192.168.251.1/30 dev ca$ID; ip -n $NA link set ca$ID up
ip -n $NB addr add 192.168.251.2/30 dev cb$ID; ip -n $NB link set cb$ID up
IMPAIR=
if [ -n "$LOSS" ]; then
  if ! ip netns exec $NA tc qdisc add dev da$ID root netem loss "$LOSS%" 2>/dev/null ||
     ! ip netns exec $NB tc qdisc add dev db$ID root netem loss "$LOSS%" 2>/dev/null; then
    # no netem in this kernel (nor tc actions): mpnic drops LOSS % of the frames it
    # receives and of those it sends, so both directions of the link lose LOSS %
    echo "netem unavailable: loss $LOSS % injected in mpnic's data plane, both directions" | tee -a "$OUT/run.txt"
    IMPAIR="MPNIC_LOSS_PCT=$LOSS MPNIC_LOSS_SEED=${LOSS_SEED:-1}"
    LOSS=
  fi
fi
ip netns exec $NA $METAROCE_REF serve --iface da$ID --ip 10.0.1.1 --listen 127.0.0.1:7471 >"$OUT/ref.log" 2>&1 &
APID=$!
ip netns exec $NB env PYTHONPATH=$HERE $IMPAIR MPNIC_RTO_MIN_US=${RTO_MIN_US:-2000} MPNIC_RTO_INIT_US=${RTO_INIT_US:-4000} $PY -m mpnic serve --iface db$ID --ip 10.0.1.2 \
   --listen 192.168.251.2:7471 >"$OUT/mpnic.log" 2>&1 &
BPID=$!
if [ -n "${CAP:-}" ]; then
  ip netns exec $NA tshark -q -a duration:${CAPSEC:-20} -i da$ID -w "$OUT/link.pcap" >"$OUT/tshark.log" 2>&1 & CPID=$!
  sleep 3
fi
for i in $(seq 50); do ip netns exec $NA bash -c "exec 3<>/dev/tcp/192.168.251.2/7471 && exec 4<>/dev/tcp/127.0.0.1/7471" 2>/dev/null && break; sleep 0.1; done
timeout $TMO ip netns exec $NA $METAROCE interop --a 127.0.0.1:7471 --b 192.168.251.2:7471 \
   --json "$OUT/interop.json" --markdown "$OUT/interop.md" "$@" 2>&1 | tee "$OUT/run.txt"
RC=${PIPESTATUS[0]}
if [ -n "$LOSS" ]; then
  for x in "$NA da$ID" "$NB db$ID"; do set -- $x
    echo "netem on $2: $(ip netns exec $1 tc -s qdisc show dev $2 | grep -o 'Sent [0-9]* bytes [0-9]* pkt (dropped [0-9]*')"
  done | tee -a "$OUT/run.txt"
fi
if [ -n "$IMPAIR" ]; then
  kill "$BPID" 2>/dev/null; wait "$BPID" 2>/dev/null; BPID=
  grep -h '^impairment' "$OUT/mpnic.log" | tee -a "$OUT/run.txt"
fi
if [ -n "${CPID:-}" ]; then wait "$CPID" 2>/dev/null; fi
echo "rc=$RC report: $OUT"
exit "$RC"
