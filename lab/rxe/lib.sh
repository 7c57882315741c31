# lib.sh -- shell functions the rxe lab scripts share (sourced, not run).

# wait_for_agent NS VM_PID IP PORT GUEST_LOG SHARE_DIR
# Waits (180 s at most) until a TCP connection to IP:PORT succeeds from
# namespace NS, while the guest (VM_PID) runs. Returns 0 when the agent
# listens; else prints the guest log's tail and the agent's log to stderr
# and returns 1.
wait_for_agent() {
  local ns=$1 vm=$2 ip=$3 port=$4 log=$5 share=$6
  for _ in $(seq 1 180); do
    if ip netns exec "$ns" timeout 2 bash -c "exec 3<>/dev/tcp/$ip/$port" 2>/dev/null; then return 0; fi
    kill -0 "$vm" 2>/dev/null || break
    sleep 1
  done
  echo "the guest's agent did not come up on $ip:$port; guest log:" >&2
  tr -d '\r' < "$log" | tail -n 30 >&2
  cat "$share/agent.log" >&2 2>/dev/null
  return 1
}
