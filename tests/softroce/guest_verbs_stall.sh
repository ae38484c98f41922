#!/bin/bash
# A peer's QP in the error state that never told us (a responder that
# refused a WR and whose NAK was lost): VM1 moves its inbound QPs from VM2
# to ERR inside its roshmd (gdb calls ibv_modify_qp, stall_inbound.gdb);
# VM2's QP stays in RTS and its next WRs get no answer. They must fail after
# transport.verbs.retry_count retries, VM2 must connect to VM1 again, and the
# next perftest pair must pass. Soft-RoCE retries forever at a retry count
# of 7: every WR to VM1 then waited for good (docs/operations.md).
n=$1
. "$(dirname "$0")/guest_common.sh"
guest_net "$n"
guest_conf "$n" 'registry: { dir = "/run/shared/registry"; revalidate_ms = 500; };
transport: { verbs: { enabled = true; device = "rxe0"; secret_file = "/run/shared/secret"; }; };'
guest_roshmd "$n"
i=0
pair() {   # label tool args...
  local label=$1
  i=$((i + 1))
  shift
  perf_pair $i roshm0 "$1" -F "${@:2}"
  [ -n "$PAIR_OK" ] && say "ok: $label: $*"
}
pair before ib_read_lat -n 20    # VM2 and VM1 connected both ways
# sr_client (VM2, two clients): WRITE, FETCH_ADD, WRITE and another
# client's WRITE meet the stall: each fails with a clear status and
# nothing lands (no silent retry: DESIGN.md), and a WRITE once the peer is
# back lands; VM1's sowner checks the bytes and the counter
if [ "$n" = 1 ]; then
  timeout 300 "$SR" sowner & so=$!
  for _ in $(seq 600); do [ -e /run/shared/stall.opened ] && break; sleep 0.1; done
  gdb -p "$RD" -batch -x "$(dirname "$0")/stall_inbound.gdb" 2>&1 | grep '^stalled:' | sed 's/^/guest: /'
  touch /run/shared/stalled
else
  timeout 300 "$SR" stall & so=$!
  for _ in $(seq 600); do [ -e /run/shared/stalled ] && break; sleep 0.1; done
  t0=$(date +%s)
fi
# WRs to VM1 meet the dead QP and fail after retry_count retries: this pair
# may fail (as an application's QP does when its NIC's retries run out) or
# pass, by which of its operations were in flight then; not checked
pair during ib_read_lat -n 20
[ "$n" = 2 ] && say "the pair during the stall took $(( $(date +%s) - t0 )) s"
wait $so; rc=$?
say "sr_client $([ "$n" = 1 ] && echo sowner || echo stall) exit $rc"
pair after ib_read_lat -n 20
# Then VM1's link goes down for 3 s and comes back: its roshmd reads the
# device's async events (verbs_async.c), logs both, and shows the port in
# `roshmctl status`; the connections outlive the flap (nothing was in
# flight) and the next pair passes.
port_state() {   # label: the "verbs" part of roshmctl status
  "$B/client-lib/tools/roshmctl" -s /run/roshm/roshmd.sock -j status |
    python3 -c 'import json, sys; d = json.load(sys.stdin)["verbs"]
print("guest: %s: port_state:%s port_downs:%d" % (sys.argv[1], d["port_state"], d["port_downs"]))' "$1"
}
if [ "$n" = 1 ]; then
  ip link set eth0 down
  sleep 3
  port_state down
  ip link set eth0 up
  for _ in $(seq 100); do grep -q 'port 1 is up' /run/shared/roshmd-1.log && break; sleep 0.1; done
  grep -E 'port 1 is (down|up)' /run/shared/roshmd-1.log | sed 's/^/guest: vm1: /'
  port_state up
  touch /run/shared/flapped
else
  for _ in $(seq 1200); do [ -e /run/shared/flapped ] && break; sleep 0.1; done
fi
pair "after the flap" ib_read_lat -n 20
if [ "$n" = 2 ]; then
  grep -E 'connection to node vm1 lost|connected to node vm1' /run/shared/roshmd-2.log | sed 's/^/guest: vm2: /'
  "$B/client-lib/tools/roshmctl" -s /run/roshm/roshmd.sock peers | sed 's/^/guest: /'
fi
kill -TERM $RD; wait $RD
say "roshmd exit $?"
