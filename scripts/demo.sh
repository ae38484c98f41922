#!/usr/bin/env bash
# make demo: start two roshmd nodes, run a pod on each that share a region
# across nodes, show what happened and a short message-size sweep, stop
# everything, end with "demo: OK".
set -euo pipefail
B=${1:-build}
D=/tmp/roshm-demo
rm -rf "$D"; mkdir -p "$D"
source "$(dirname "$0")/twonode.sh"
TN_TELEMETRY_A=1   # node-a answers DPDK telemetry (shown below)
trap 'twonode_down >/dev/null 2>&1 || true' EXIT

echo "demo: starting two roshmd nodes on $( [[ $(id -u) -eq 0 ]] && echo "network namespaces" || echo loopback ) (tcp transport, file registry in $D/registry)"
twonode_up "$B" "$D" || { echo "demo: FAILED (roshmd did not start)"; exit 1; }
echo "demo: $TN_MODE"

echo "demo: pod 1 on node-a creates region default/board; pod 2 on node-b writes into it across the network"
ROSHM_SOCK=$SOCK_A bg_a "$B/client-lib/examples/demo-owner" > "$D/owner.out"
owner=$BG_PID
sleep 0.3
ROSHM_SOCK=$SOCK_B in_b "$B/client-lib/examples/demo-writer" | sed 's/^/    /'
wait "$owner" || { cat "$D/owner.out"; echo "demo: FAILED (owner)"; exit 1; }
head -3 "$D/owner.out" | sed 's/^/    /'
echo "    ..."
tail -2 "$D/owner.out" | sed 's/^/    /'
echo "demo: roshmctl peers on node-b:"
ctl_b peers | sed 's/^/    /'

echo "demo: message-size sweep from node-b to a region on node-a (tcp transport):"
bg_a "$B/perf/roshm-perf" -s "$SOCK_A" serve sweep 1048576 > "$D/serve.out"
serve=$BG_PID
in_b "$B/perf/roshm-perf" -s "$SOCK_B" --remote default/sweep -n 300 sweep 65536 2>&1 | \
  awk '/READ completion/ {stop=1} !stop {print "    " $0}'

# DPDK telemetry: the region list comes in pages ("next" names the next
# page's start; see docs/operations.md), and one region by name.
if command -v dpdk-telemetry.py >/dev/null; then
  echo "demo: DPDK telemetry of node-a (dpdk-telemetry.py -f $TN_PREFIX-a): /roshm/regions and /roshm/region,default/sweep:"
  tel=
  for _ in $(seq 30); do   # the region list is refreshed once a second
    tel=$(printf '/roshm/regions\n/roshm/region,default/sweep\n' | dpdk-telemetry.py -f $TN_PREFIX-a 2>&1) || true
    [[ $tel == *'"name": "default/sweep"'* ]] && break
    sleep 0.2
  done
  sed 's/^/    /' <<< "$tel"
  [[ $tel == *'"name": "default/sweep"'* ]] || { echo "demo: FAILED (telemetry does not show default/sweep)"; exit 1; }
else
  echo "demo: (dpdk-telemetry.py, from dpdk-dev, is not installed: telemetry not shown)"
fi
kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null || true

if twonode_down; then echo "demo: both roshmd stopped cleanly"; else echo "demo: FAILED (roshmd exit status)"; exit 1; fi
trap - EXIT
echo "demo: OK"
