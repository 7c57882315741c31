#!/bin/bash
# interop.sh -- the reference transport against Linux soft-RoCE (rdma_rxe):
# ibv_rc_pingpong's server runs on rxe in a QEMU guest, `metaroce-ref
# pingpong` is its client on the host side of a TAP.
#
# Usage: lab/rxe/interop.sh WORKDIR [OUTDIR]
#   WORKDIR  built by mkvm.sh (kernel, initramfs, share/)
#   OUTDIR   where the capture and logs go (default WORKDIR/interop)
# Knobs (environment): SIZE (4096), ITERS (20), PMTU (1024), TMO (120 s per
#   side), BIN (metaroce-ref binary), METAROCE (conformance binary).
#
# Network rule: the TAP `tap-rxe` exists only in the namespace `mr-rxe-<pid>`
# that this script creates and deletes (trap, every exit path). The guest's
# only NIC is that TAP; 10.77.0.1 (guest) and 10.77.0.100 (host side, which
# carries the TCP exchange) exist only there. Every process runs under
# `timeout`. QEMU's filter-dump writes every frame of the guest's NIC to
# OUTDIR/rxe_pingpong.pcap.
#
# Exit status: 0 PASS (client exit 0 with every echo verified, and the
# guest's ibv_rc_pingpong exit 0 with its result lines), 1 FAIL, 2 usage.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 WORKDIR [OUTDIR]" >&2; exit 2; }
W=$(cd "$1" && pwd) || exit 2
OUT=${2:-$W/interop}
H=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$H/../.." && pwd)
SIZE=${SIZE:-4096}; ITERS=${ITERS:-20}; PMTU=${PMTU:-1024}; TMO=${TMO:-120}
BIN=${BIN:-$ROOT/target/release/metaroce-ref}
METAROCE=${METAROCE:-$ROOT/target/release/metaroce}
NS=mr-rxe-$$
VMIP=10.77.0.1; MYIP=10.77.0.100; VMMAC=52:54:00:00:00:0a
for f in "$W/vmlinuz" "$W/initrd.gz" "$BIN"; do
  [ -e "$f" ] || { echo "$0: missing $f (mkvm.sh WORKDIR; cargo build --release -p metaroce-ref)" >&2; exit 1; }
done
mkdir -p "$OUT" "$W/share"
PCAP=$OUT/rxe_pingpong.pcap; VMLOG=$OUT/guest.log; CLOG=$OUT/client.log
rm -f "$PCAP" "$W/share/pingpong.status"
cp "$H/pingpong_srv.sh" "$W/share/"
printf 'SIZE=%s\nITERS=%s\nMTU=%s\nTMO=%s\nMYIP=%s\n' "$SIZE" "$ITERS" "$PMTU" "$TMO" "$VMIP" > "$W/share/pingpong.env"

VM=
cleanup() {
  [ -n "$VM" ] && kill "$VM" 2>/dev/null && wait "$VM" 2>/dev/null
  ip netns del "$NS" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

T0=$(date +%s.%N)
ip netns add "$NS" || exit 1
ip netns exec "$NS" ip link set lo up
ip netns exec "$NS" ip tuntap add dev tap-rxe mode tap
ip netns exec "$NS" ip addr add "$MYIP/24" dev tap-rxe
ip netns exec "$NS" ip link set tap-rxe up

ip netns exec "$NS" timeout $((TMO + 90)) "$H/vm.sh" "$W" pingpong_srv.sh \
  -netdev tap,id=n0,ifname=tap-rxe,script=no,downscript=no,vnet_hdr=off \
  -device virtio-net-pci,netdev=n0,mac=$VMMAC \
  -object filter-dump,id=f0,netdev=n0,file="$PCAP" > "$VMLOG" 2>&1 &
VM=$!

# The client retries the TCP connection until the guest's server listens.
ip netns exec "$NS" timeout $((TMO + 60)) "$BIN" pingpong --iface tap-rxe --ip $MYIP \
  --peer-ip $VMIP --peer-mac $VMMAC --connect $VMIP --size "$SIZE" --iters "$ITERS" \
  --pmtu "$PMTU" --timeout-secs $((TMO + 40)) > "$CLOG" 2>&1
CRC=$?
wait "$VM"; VRC=$?; VM=
ip netns del "$NS"
T1=$(date +%s.%N)

echo "== guest (rdma_rxe, ibv_rc_pingpong server)"
grep -a '^GUEST' "$VMLOG" | tr -d '\r'
echo "== host (metaroce-ref pingpong client), exit $CRC"
cat "$CLOG"
GRC=$(cat "$W/share/pingpong.status" 2>/dev/null || echo none)
RESULT=FAIL
if [ "$CRC" = 0 ] && [ "$GRC" = 0 ] && grep -aq "GUEST pp: .* bytes in .* seconds" "$VMLOG" \
   && grep -q '"ok":true' "$CLOG"; then RESULT=PASS; fi
echo "== capture: $PCAP ($(stat -c %s "$PCAP" 2>/dev/null || echo 0) bytes)"
if [ -x "$METAROCE" ] && [ -s "$PCAP" ]; then
  echo "== metaroce check --pmtu $PMTU"
  timeout 120 "$METAROCE" check --pmtu "$PMTU" "$PCAP" 2>&1 | tail -n 25
  echo "(metaroce check exit ${PIPESTATUS[0]})"
else
  echo "== metaroce check skipped ($METAROCE not built: cargo build --release -p metaroce-conformance)"
fi
printf '== %s: size %s, iters %s, pmtu %s; client exit %s, guest pingpong exit %s, qemu exit %s; %.1f s\n' \
  "$RESULT" "$SIZE" "$ITERS" "$PMTU" "$CRC" "$GRC" "$VRC" "$(echo "$T1 - $T0" | bc)"
[ $RESULT = PASS ]
