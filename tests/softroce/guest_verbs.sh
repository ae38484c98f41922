#!/bin/bash
# In a Soft-RoCE VM: rxe0 on eth0 and roshmd with the verbs transport (file
# registry on the shared directory). VM1 runs the owner pod and, while the
# transaction writers of VM2 stream, kills its roshmd (-9) and restarts it.
# VM2 runs the pods that work on VM1's regions over RoCE v2 (sr_client.c),
# with two QPs to VM1 (qps_per_peer = 2): pods are spread over both.
n=$1
. "$(dirname "$0")/guest_common.sh"
guest_net "$n"
guest_conf "$n" 'registry: { dir = "/run/shared/registry"; revalidate_ms = 300; };
transport: { verbs: { enabled = true; device = "rxe0"; secret_file = "/run/shared/secret";
                      qps_per_peer = '"$n"'; }; };
drain: { timeout_ms = 120000; };
txn: { deadline_ms = 180000; abort_ms = 1000; };'
# GID selection: VM1 picks its GID by netdev, VM2 by device; a filter that
# matches no RoCE v2 GID is refused with the GIDs it saw
if [ "$n" = 1 ]; then SEL='netdev = "eth0";'; else SEL='device = "rxe0";'; fi
sed -i "s|device = \"rxe0\";|$SEL|" /run/roshm/roshmd.conf
if [ "$n" = 2 ]; then
  sed 's|device = "rxe0";|device = "rxe0"; netdev = "lo";|; s|vm2";|vm2x";|' /run/roshm/roshmd.conf > /run/roshm/bad.conf
  out=$("$B/dataplane/roshmd" -c /run/roshm/bad.conf 2>&1); rc=$?
  if [ $rc = 1 ] && echo "$out" | grep -q "no RoCE v2 GID with an IP address matches.*rxe0/1/"; then
    say "a GID filter that matches nothing is refused"
  else
    say "FAIL: bad GID filter: exit $rc: $out"
  fi
fi
guest_roshmd "$n"
if [ "$n" = 1 ]; then
  timeout 600 "$SR" owner &
  OWNER=$!
  # a grant's revoke over RoCE: refused at once by our NIC (sr_client.c)
  timeout 400 "$SR" gowner & GOWNER=$!
  # pods on this node work on our regions at the same time as VM2's
  for _ in $(seq 3000); do [ -e /run/shared/atomics.go ] && break; sleep 0.1; done
  timeout 300 "$SR" fa 3 atomics.done & a=$!
  timeout 300 "$SR" lock 3 & b=$!
  timeout 300 "$SR" txn txl 0 400 & c=$!
  wait $a && wait $b && wait $c && touch /run/shared/atomics.local.done
  wait $GOWNER; say "gowner exit $?"
  # mid-stream: kill the owner node's roshmd and bring it back
  for _ in $(seq 3000); do [ -e /run/shared/txn.started ] && break; sleep 0.1; done
  sleep 1
  say "kill -9 roshmd under the transaction writers"
  kill -9 $RD; wait $RD 2>/dev/null
  rm -f /run/roshm/roshmd.sock
  sleep 0.5
  guest_roshmd "$n"
  say "roshmd restarted"
  wait $OWNER; say "owner exit $?"
else
  for _ in $(seq 600); do [ -e /run/shared/ready ] && break; sleep 0.1; done
  timeout 300 "$SR" ops && touch /run/shared/ops.done
  touch /run/shared/atomics.go
  timeout 300 "$SR" fa 1 & a=$!
  timeout 300 "$SR" fa 2 & b=$!
  timeout 300 "$SR" lock 1 & c=$!
  timeout 300 "$SR" lock 2 & d=$!
  timeout 300 "$SR" txn txl 1 400 & e=$!
  wait $a && wait $b && wait $c && wait $d && wait $e && touch /run/shared/atomics.done
  timeout 120 "$SR" probe; say "probe exit $?"
  timeout 300 "$SR" gpeer; say "gpeer exit $?"
  timeout 600 "$SR" txn txn 0 1500 & a=$!
  timeout 600 "$SR" txn txn 1 1500 & b=$!
  # the peers table while the writers hold VM1's regions open (after they
  # close them, a peer that drops out of the file registry for a moment is
  # not dialled again: nothing refers to it)
  while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; do
    "$B/client-lib/tools/roshmctl" -s /run/roshm/roshmd.sock peers > /run/peers.now 2>&1 &&
      grep -qE '^vm1 .* true ' /run/peers.now && cp /run/peers.now /run/peers.seen
    sleep 2
  done
  wait $a; say "txn 0 exit $?"
  wait $b; say "txn 1 exit $?"
  cat /run/peers.seen 2>/dev/null || "$B/client-lib/tools/roshmctl" -s /run/roshm/roshmd.sock peers
  # rkeys and addresses are for peers' NICs only: no admin output shows them
  if "$B/client-lib/tools/roshmctl" -s /run/roshm/roshmd.sock --json regions | grep -qiE 'rkey|raddr'; then
    say "FAIL: roshmctl regions shows an rkey"
  else
    say "regions listing shows no rkey"
  fi
  "$B/client-lib/tools/roshmctl" -s /run/roshm/roshmd.sock stats | head -20
  sleep 2
fi
kill -TERM $RD; wait $RD
say "roshmd exit $?"
