# guest.sh -- runs INSIDE an rxe guest (sourced by the per-run wrapper that
# record.sh writes into WORKDIR/share). Not meant to be run on the host.
#
# Expects these variables from the wrapper:
#   ROLE   a (server, 10.77.0.1) or b (client, 10.77.0.2)
#   MYIP   this guest's address;  PEER  the other guest's address
#   RUN    run name (used for the files it leaves in /tmp/share)
#   CMDS   newline-separated commands; the client appends $PEER to each
#   LOSS   netem loss percentage applied to this guest's eth0 egress ("" = none)
#   TMO    per-command timeout in seconds
# The 10.77.0.0/24 addresses exist only inside the guests: their only link is
# the QEMU socket netdev that record.sh joins on 127.0.0.1.
set -u
log() { echo "LAB[$ROLE] $*"; }
ip link set lo up
ip link set eth0 up
ip addr add "$MYIP/24" dev eth0
rdma link add rxe0 type rxe netdev eth0
sleep 1
log "uname -r: $(uname -r)"
log "versions: $(dpkg-query -W -f='${Package}=${Version} ' rdma-core ibverbs-providers ibverbs-utils perftest 2>/dev/null)"
log "gid0=$(cat /sys/class/infiniband/rxe0/ports/1/gids/0) gid1=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1) type1=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1)"
log "active_mtu: $(rdma link show rxe0/1 2>/dev/null)"
if [ -n "${LOSS:-}" ]; then
  tc qdisc add dev eth0 root netem loss "${LOSS}%"
  log "netem: $(tc qdisc show dev eth0)"
fi
counters() {  # one line: name=value ...
  for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do printf '%s=%s ' "$(basename "$f")" "$(cat "$f")"; done
}
STATUS=0
n=0
while IFS= read -r c; do
  [ -n "$c" ] || continue
  n=$((n+1))
  if [ "$ROLE" = a ]; then
    log "run $n: $c"
    timeout "$TMO" $c; rc=$?
  else
    sleep 2   # let the server (started at the same time) get to listen()
    rc=1
    for try in $(seq 1 40); do
      log "run $n try $try: $c $PEER"
      timeout "$TMO" $c "$PEER"; rc=$?
      [ $rc -eq 0 ] && break
      [ $rc -eq 124 ] && break   # timed out: do not start a second conversation
      sleep 1
    done
  fi
  log "run $n exit=$rc"
  [ $rc -eq 0 ] || STATUS=$rc
done <<< "$CMDS"
sleep 1   # let the last frames (TCP FIN, last ACKs) cross the link
C=$(counters)
log "hw_counters: $C"
echo "$C" > "/tmp/share/$RUN.$ROLE.counters"
echo "$STATUS" > "/tmp/share/$RUN.$ROLE.status"
log "done status=$STATUS"
