#!/usr/bin/env bash
# Base and MP goodput against a raw AF_PACKET blast of the same frame size,
# side by side, on one veth pair between two namespaces this script creates and
# deletes (trap on every exit path). Needs root, iproute2 and jq.
#
#   sudo reference-impl/bench/veth_perf.sh            # 3 x 5 s per mode
#   RUNS=5 DURATION=3 SIZE=65536 DEPTH=8 sudo -E reference-impl/bench/veth_perf.sh
#
# Modes: blast (raw frames, the ceiling), Base write, read, send, and MP
# mp-write, mp-read, mp-send (`--profile mp`, MP negotiated on INIT->RTR,
# mp_window MP_WINDOW, mp_rto_min MP_RTO_MIN_US, mp_reorder_threshold
# MP_REORDER, the other SPEC 10.3
# constants). Namespaces are named NS_PREFIX-<pid>-{a,b} (NS_PREFIX
# defaults to mr-perf). Frames:
# MTU 9000 / PMTU 4096 when the veth takes MTU 9000, else 1500 / 1024.
# A mode may carry the suffix `:frame` (e.g. `mp-write:frame`): the same
# mode with `--service-per-frame` (the driver services the device after
# every received frame, as before 2026-11-30, instead of once per receive
# batch), for comparisons side by side.
# The suffix `:alt` runs the mode with the binary ALT_BIN instead (e.g. a
# build of an earlier commit, `mp-write:alt`), for before/after side by side.
# PIN=1 pins the client (the sender of the blast, the requester) to CPU
# PIN_CLIENT_CPU (0) and the server to PIN_SERVER_CPU (1) with taskset, for
# the blast and every mode alike; by default the scheduler places them.
# Prints each run's two JSON summaries on stderr, then a table of medians
# and the ratio to the blast. `blast` is the rate the receiver counted (the
# ceiling); `blast-tx` what the sender pushed into its socket (the
# difference was dropped at the receiver). Base and MP are measured at the
# requester (message bytes completed per second). Every run is bounded by DURATION and a
# hard `timeout`.
set -euo pipefail

RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
SIZE=${SIZE:-65536}
DEPTH=${DEPTH:-8}
WINDOW=${WINDOW:-256}
MP_WINDOW=${MP_WINDOW:-1024}
# mp_rto_min: 10 ms (SPEC 10.3's 100 us is for a fabric; on this shared
# 2-vCPU VM scheduling stalls of milliseconds made it fire spuriously, as
# Base's --ack-timeout 14 (67 ms) avoids for Base).
MP_RTO_MIN_US=${MP_RTO_MIN_US:-10000}
MP_REORDER=${MP_REORDER:-3}
MP_ACK_COALESCE_US=${MP_ACK_COALESCE_US:-8}
MP_TARGET_QDELAY_US=${MP_TARGET_QDELAY_US:-10}
MODES=${MODES:-"blast write read send mp-write mp-read mp-send"}
ALT_BIN=${ALT_BIN:-}
PIN=${PIN:-0}
PIN_CLIENT_CPU=${PIN_CLIENT_CPU:-0}
PIN_SERVER_CPU=${PIN_SERVER_CPU:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${BIN:-$ROOT/target/release/metaroce-ref}

[ "$(id -u)" = 0 ] || { echo "veth_perf: needs root (namespaces, AF_PACKET)" >&2; exit 2; }
command -v jq >/dev/null || { echo "veth_perf: needs jq" >&2; exit 2; }
if [ -z "${NO_BUILD:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p metaroce-ref)
fi
[ -x "$BIN" ] || { echo "veth_perf: no binary at $BIN" >&2; exit 2; }
PIN_CLI=(); PIN_SRV=()
if [ "$PIN" = 1 ]; then
    command -v taskset >/dev/null || { echo "veth_perf: PIN=1 needs taskset" >&2; exit 2; }
    PIN_CLI=(taskset -c "$PIN_CLIENT_CPU"); PIN_SRV=(taskset -c "$PIN_SERVER_CPU")
fi

ID="${NS_PREFIX:-mr-perf}-$$"
NSA="$ID-a"; NSB="$ID-b"
DIR=$(mktemp -d "/tmp/$ID.XXXX")
MAC_A=02:99:00:00:01:01; MAC_B=02:99:00:00:01:02
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    ip netns del "$NSA" 2>/dev/null || true
    ip netns del "$NSB" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NSA"
ip netns add "$NSB"
ip link add veth0 netns "$NSA" type veth peer name veth1 netns "$NSB"
MTU=9000; PMTU=4096
for ns_dev_mac in "$NSA veth0 $MAC_A" "$NSB veth1 $MAC_B"; do
    set -- $ns_dev_mac
    for k in all default; do
        ip netns exec "$1" sysctl -qw "net.ipv6.conf.$k.disable_ipv6=1" || true
    done
    ip -n "$1" link set "$2" address "$3"
    ip -n "$1" link set lo up
    if ! ip -n "$1" link set "$2" mtu 9000 2>/dev/null; then MTU=1500; PMTU=1024; fi
    ip -n "$1" link set "$2" up
done
if [ "$MTU" = 1500 ]; then
    ip -n "$NSA" link set veth0 mtu 1500; ip -n "$NSB" link set veth1 mtu 1500
fi
sleep 0.5

# run_pair MODE I: one measurement; sets G to the gbps figure. Not run in a
# subshell, so that PIDS reaches the cleanup trap.
run_pair() {
    local mode=$1 i=$2 common extra srv cli base=${1%%:*} bin=$BIN
    common=(--size "$SIZE" --pmtu "$PMTU" --timeout-secs $((DURATION + 30)))
    case "$mode" in *:frame*) common+=(--service-per-frame) ;; esac
    case "$mode" in *:alt*) bin=$ALT_BIN ;; esac
    rm -f "$DIR"/*.json
    if [ "$base" = blast ]; then
        extra=(--blast --duration "$DURATION")
    else
        local op=${base#mp-} profile=base
        [ "$op" != "$base" ] && profile=mp
        extra=(--op "$op" --profile "$profile" --mp-window "$MP_WINDOW" --mp-rto-min-us "$MP_RTO_MIN_US" \
            --mp-reorder-threshold "$MP_REORDER" --mp-ack-coalesce-us "$MP_ACK_COALESCE_US" \
            --mp-target-qdelay-us "$MP_TARGET_QDELAY_US" \
            --duration "$DURATION" --depth "$DEPTH" --window "$WINDOW")
    fi
    srv="$DIR/$mode-$i-server"; cli="$DIR/$mode-$i-client"
    timeout $((DURATION + 40)) ip netns exec "$NSB" "${PIN_SRV[@]}" "$bin" perf --iface veth1 --role server \
        --ip 10.99.0.2 --peer-mac "$MAC_A" --peer-ip 10.99.0.1 \
        --info-out "$DIR/server.json" --info-in "$DIR/client.json" \
        "${common[@]}" "${extra[@]}" >"$srv.out" 2>"$srv.err" &
    local spid=$!; PIDS+=("$spid")
    timeout $((DURATION + 40)) ip netns exec "$NSA" "${PIN_CLI[@]}" "$bin" perf --iface veth0 --role client \
        --ip 10.99.0.1 --peer-mac "$MAC_B" --peer-ip 10.99.0.2 \
        --info-out "$DIR/client.json" --info-in "$DIR/server.json" \
        "${common[@]}" "${extra[@]}" >"$cli.out" 2>"$cli.err" &
    local cpid=$!; PIDS+=("$cpid")
    local rc=0
    wait "$cpid" || rc=$?
    wait "$spid" || rc=$?
    # The blast is measured where it lands; Base and MP at the requester.
    local who=$cli
    [ "$mode" = blast ] && who=$srv
    echo "$mode run $i: client $(tail -n1 "$cli.out")" >&2
    echo "$mode run $i: server $(tail -n1 "$srv.out")" >&2
    if [ "$rc" != 0 ]; then
        echo "$mode run $i failed (exit $rc); stderr: $(tail -n3 "$cli.err" "$srv.err")" >&2
        G=nan; return
    fi
    if [ "$mode" = blast ]; then
        tail -n1 "$cli.out" | jq -r '.goodput.gbps' >"$DIR/blast-$i.tx"
    fi
    G=$(tail -n1 "$who.out" | jq -r '.goodput.gbps')
}

median() { tr ' ' '\n' | awk '$1 != "" && $1 != "nan"' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A RESULTS RETRANS
for i in $(seq 1 "$RUNS"); do          # interleaved: drift hits every mode
    for mode in $MODES; do
        run_pair "$mode" "$i"
        RESULTS[$mode]="${RESULTS[$mode]:-} $G"
        if [ "$mode" = blast ]; then
            RESULTS[blast-tx]="${RESULTS[blast-tx]:-} $(cat "$DIR/blast-$i.tx" 2>/dev/null || echo nan)"
        fi
        if [ "$mode" != blast ] && [ -f "$DIR/$mode-$i-client.out" ]; then
            r=$(tail -n1 "$DIR/$mode-$i-client.out" | jq -r '.retransmitted_packets // "?"')
            RETRANS[$mode]="${RETRANS[$mode]:-} $r"
        fi
        sleep 0.3
    done
done

echo
echo "veth_perf: $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "link: veth MTU $MTU, PMTU $PMTU; message $SIZE B; depth $DEPTH; window $WINDOW; mp_window $MP_WINDOW, mp_rto_min $MP_RTO_MIN_US us, mp_reorder_threshold $MP_REORDER, mp_ack_coalesce_time $MP_ACK_COALESCE_US us, mp_target_qdelay $MP_TARGET_QDELAY_US us; $RUNS x ${DURATION} s per mode"
echo "load average at the start: $LOAD_START; at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$PIN" = 1 ]; then
    echo "pinned: client (blast sender, requester) on CPU $PIN_CLIENT_CPU, server on CPU $PIN_SERVER_CPU"
else
    echo "not pinned (PIN=1 pins client and server to two CPUs)"
fi
BLAST=$(echo "${RESULTS[blast]:-}" | median)
printf '%-14s %12s %10s %10s  %s\n' mode "median Gb/s" "MiB/s" "vs blast" "runs (Gb/s) | retransmitted"
SHOW=$MODES
case " $MODES " in *" blast "*) SHOW=$(echo "$MODES" | sed 's/blast/blast blast-tx/') ;; esac
for mode in $SHOW; do
    m=$(echo "${RESULTS[$mode]}" | median)
    mib=$(awk -v g="$m" 'BEGIN { if (g == "nan") print "nan"; else printf "%.0f", g * 1e9 / 8 / 1048576 }')
    ratio=$(awk -v g="$m" -v b="$BLAST" 'BEGIN { if (g == "nan" || b == "nan" || b == 0) print "-"; else printf "%.1f %%", 100 * g / b }')
    printf '%-14s %12s %10s %10s  %s | %s\n' "$mode" "$m" "$mib" "$ratio" "${RESULTS[$mode]# }" "${RETRANS[$mode]:-}"
done
