# agent_srv.sh -- runs INSIDE the rxe guest that certify.sh boots (the guest
# sees it as /tmp/share/agent_srv.sh). Not meant to be run on the host.
#
# Reads /tmp/share/agent.env (MYIP, PORT, TMO, AGENT, LINK_MTU, optional
# LOSS), sets the MTU
# (9000 gives rxe an active MTU of 4096) and MYIP/24 on eth0,
# adds rxe0 on it, starts metaroce-agent-verbs on MYIP:PORT (the host built it
# against libibverbs; the guest runs it from the host's root over 9p), and
# keeps it running until the host creates /tmp/share/agent.stop or TMO
# seconds pass. Then it prints rxe's hw_counters. Lines start with "GUEST ".
. /tmp/share/agent.env
g() { echo "GUEST $*"; }
ip link set lo up
ip link set eth0 mtu "${LINK_MTU:-1500}"
ip link set eth0 up
ip addr add "$MYIP/24" dev eth0
rdma link add rxe0 type rxe netdev eth0
# Optional loss on the guest's egress (interop.sh LOSS=N): netem drops N % of
# the frames eth0 sends, before they reach the link (and the capture).
if [ -n "${LOSS:-}" ]; then
  tc qdisc add dev eth0 root netem loss "${LOSS}%"
  g "netem: $(tc qdisc show dev eth0)"
fi
sleep 1
g "uname -r: $(uname -r)"
g "versions: $(dpkg-query -W -f='${Package}=${Version} ' rdma-core libibverbs1 ibverbs-providers 2>/dev/null)"
g "gid1=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1) type1=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1)"
g "link: $(rdma link show rxe0/1 2>/dev/null)"
uname -r > /tmp/share/agent.kver
dpkg-query -W -f='${Version}' rdma-core > /tmp/share/agent.rdmacore 2>/dev/null
counters() {
  for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do printf '%s=%s ' "$(basename "$f")" "$(cat "$f")"; done
}
g "hw_counters before: $(counters)"
timeout "$TMO" "$AGENT" --device rxe0 --ip "$MYIP" --udp-sport kernel --listen "$MYIP:$PORT" > /tmp/share/agent.log 2>&1 &
A=$!
g "agent pid $A"
for _ in $(seq 1 "$TMO"); do
  [ -e /tmp/share/agent.stop ] && break
  kill -0 "$A" 2>/dev/null || { g "agent exited early"; break; }
  sleep 1
done
kill "$A" 2>/dev/null; wait "$A"; g "agent exit=$?"
C=$(counters)
g "hw_counters after: $C"
echo "$C" > /tmp/share/agent.counters
sleep 1
