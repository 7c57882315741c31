# pingpong_srv.sh -- runs INSIDE the rxe guest that interop.sh boots (the
# guest sees it as /tmp/share/pingpong_srv.sh). Not meant to be run on the host.
#
# Reads /tmp/share/pingpong.env (SIZE, ITERS, MTU, TMO, MYIP), sets MYIP/24 on
# eth0, adds rxe0 on it and runs the ibv_rc_pingpong server (GID index 1, the
# IPv4-mapped RoCEv2 GID), then prints rxe's hw_counters. Lines start with
# "GUEST " so interop.sh can pick them out of the console log.
. /tmp/share/pingpong.env
g() { echo "GUEST $*"; }
ip link set lo up
ip link set eth0 up
ip addr add "$MYIP/24" dev eth0
rdma link add rxe0 type rxe netdev eth0
sleep 1
g "uname -r: $(uname -r)"
g "versions: $(dpkg-query -W -f='${Package}=${Version} ' rdma-core ibverbs-utils 2>/dev/null)"
g "gid1=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1) type1=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1)"
g "server: ibv_rc_pingpong -d rxe0 -g 1 -m $MTU -s $SIZE -n $ITERS"
timeout "$TMO" ibv_rc_pingpong -d rxe0 -g 1 -m "$MTU" -s "$SIZE" -n "$ITERS" 2>&1 | sed 's/^/GUEST pp: /'
rc=${PIPESTATUS[0]}
g "pingpong server exit=$rc"
g "neigh: $(ip neigh show dev eth0 | tr '\n' ';')"
C=$(for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do printf '%s=%s ' "$(basename "$f")" "$(cat "$f")"; done)
g "hw_counters: $C"
echo "$rc" > /tmp/share/pingpong.status
sleep 1
