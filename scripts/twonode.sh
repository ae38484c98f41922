# Sourced by demo.sh and bench.sh: two roshmd nodes with the tcp transport
# and a shared file registry. As root, each node is a network namespace
# (198.18.0.1 and .2 behind a bridge); otherwise both listen on loopback.
#   twonode_up BUILD DIR [idle_spin_us]   start node-a and node-b
#   in_a CMD... / in_b CMD...             run a command on that node
#   ctl_a ARGS... / ctl_b ARGS...         roshmctl on that node, as its admin
#   twonode_down                          stop both, remove the namespaces
# TN_PREFIX names the namespaces (PREFIX-1, PREFIX-2) and the EAL file
# prefixes (PREFIX-a, PREFIX-b); without namespaces the nodes listen on
# loopback ports TN_PORT_A and TN_PORT_B. Set them before twonode_up to run
# beside another pair (tests do).
# TN_EXTRA_CONF, when set, is appended to both nodes' configs (e.g. tenants);
# TN_DATAPLANE goes into their dataplane group (e.g. idle_yield = true;).
# With TN_TELEMETRY_A=1 node-a runs with DPDK telemetry (EAL file prefix
# $TN_PREFIX-a: dpdk-telemetry.py -f $TN_PREFIX-a); otherwise --no-telemetry.
TN_PREFIX=${TN_PREFIX:-roshm2n}
TN_PIDS=()

in_a() { if [[ -n ${TN_NS_A:-} ]]; then ip netns exec "$TN_NS_A" "$@"; else "$@"; fi; }
in_b() { if [[ -n ${TN_NS_B:-} ]]; then ip netns exec "$TN_NS_B" "$@"; else "$@"; fi; }
# bg_a / bg_b: like in_a / in_b but in the background; the program's own pid
# (ip netns exec execs it) lands in BG_PID, so that kill reaches it.
bg_a() { if [[ -n ${TN_NS_A:-} ]]; then ip netns exec "$TN_NS_A" "$@" & else "$@" & fi; BG_PID=$!; }
bg_b() { if [[ -n ${TN_NS_B:-} ]]; then ip netns exec "$TN_NS_B" "$@" & else "$@" & fi; BG_PID=$!; }

ctl_a() { "$TN_BUILD/client-lib/tools/roshmctl" -s "$SOCK_A" --admin-token-file "$TN_DIR/node-a.admin-token" "$@"; }
ctl_b() { "$TN_BUILD/client-lib/tools/roshmctl" -s "$SOCK_B" --admin-token-file "$TN_DIR/node-b.admin-token" "$@"; }

twonode_up() {
  local build=$1 dir=$2 spin=${3:-0}
  TN_BUILD=$build TN_DIR=$dir
  mkdir -p "$dir/registry"
  head -c 32 /dev/urandom | base64 > "$dir/cluster.secret"
  if [[ $(id -u) -eq 0 ]] && command -v ip >/dev/null; then
    "$(dirname "${BASH_SOURCE[0]}")/../tests/lib/netns.sh" down "$TN_PREFIX" 2 2>/dev/null || true
    "$(dirname "${BASH_SOURCE[0]}")/../tests/lib/netns.sh" up "$TN_PREFIX" 2
    TN_NS_A=$TN_PREFIX-1 TN_NS_B=$TN_PREFIX-2
    ADDR_A=198.18.0.1 ADDR_B=198.18.0.2 PORT_A=7471 PORT_B=7471
    TN_MODE="network namespaces $TN_NS_A (198.18.0.1) and $TN_NS_B (198.18.0.2)"
  else
    TN_NS_A= TN_NS_B=
    ADDR_A=127.0.0.1 ADDR_B=127.0.0.1 PORT_A=${TN_PORT_A:-7471} PORT_B=${TN_PORT_B:-7472}
    TN_MODE="one host, loopback ports $PORT_A and $PORT_B (run as root for network namespaces)"
  fi
  SOCK_A=$dir/node-a.sock SOCK_B=$dir/node-b.sock
  local n addr port sock tel
  for n in a b; do
    if [[ $n == a ]]; then addr=$ADDR_A port=$PORT_A sock=$SOCK_A ; else addr=$ADDR_B port=$PORT_B sock=$SOCK_B; fi
    tel=', "--no-telemetry"'
    [[ $n == a && ${TN_TELEMETRY_A:-0} == 1 ]] && tel=
    cat > "$dir/node-$n.conf" <<CONF
node = "node-$n";
socket = "$sock";
eal = [ "--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--file-prefix", "$TN_PREFIX-$n",
        "--log-level", "lib.eal:error"$tel ];
dataplane: { idle = "adaptive"; idle_spin_us = $spin; ${TN_DATAPLANE:-} };
registry: { backend = "file"; dir = "$dir/registry"; revalidate_ms = 500; };
transport: { tcp: { enabled = true; listen = "$addr"; port = $port; secret_file = "$dir/cluster.secret"; }; };
admin: { token_file = "$dir/node-$n.admin-token"; };
${TN_EXTRA_CONF:-}
CONF
    if [[ $n == a ]]; then bg_a "$build/dataplane/roshmd" -c "$dir/node-$n.conf" >"$dir/node-$n.log" 2>&1
    else bg_b "$build/dataplane/roshmd" -c "$dir/node-$n.conf" >"$dir/node-$n.log" 2>&1; fi
    TN_PIDS+=("$BG_PID")
  done
  for _ in $(seq 100); do [[ -S $SOCK_A && -S $SOCK_B ]] && return 0; sleep 0.1; done
  cat "$dir"/node-*.log
  return 1
}

twonode_down() {
  local p rc=0
  for p in "${TN_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${TN_PIDS[@]}"; do wait "$p" || rc=1; done
  TN_PIDS=()
  if [[ -n ${TN_NS_A:-} ]]; then
    "$(dirname "${BASH_SOURCE[0]}")/../tests/lib/netns.sh" down "$TN_PREFIX" 2
  fi
  return $rc
}
