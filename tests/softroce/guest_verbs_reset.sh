#!/bin/bash
# In a Soft-RoCE VM: one verbs QP from VM2's roshmd to VM1's carries two
# tenants' pods. VM1's doomer withdraws its region while VM2's racer streams
# WRITEs to it: the racer's WRITEs with the stale rkey are refused by VM1's
# NIC (a remote access NAK), which puts the shared QP in the error state on
# both ends. VM2's victim (another tenant, three clients) streams WRITEs on
# the same QP the whole time: none may fail, and VM1 checks that every record
# landed. Rounds of this (a new region each) go on until a reset has posted
# some of the victim's WRs again, at most 8.
n=$1
. "$(dirname "$0")/guest_common.sh"
guest_net "$n"
# revalidate_ms: VM2 learns late that doom is gone, so the NIC is what
# refuses the racer first
guest_conf "$n" 'registry: { dir = "/run/shared/registry"; revalidate_ms = 1500; };
transport: { verbs: { enabled = true; device = "rxe0"; secret_file = "/run/shared/secret";
                      qps_per_peer = 1; }; };
tenants = ( { name = "default"; token = ""; }, { name = "blue"; token = "blue-token-0123456789"; } );'
guest_roshmd "$n"
if [ "$n" = 1 ]; then
  ROSHM_TENANT=blue ROSHM_TOKEN=blue-token-0123456789 timeout 500 "$SR" vowner & v=$!
  timeout 500 "$SR" doomer & d=$!
  wait $d; say "doomer exit $?"
  wait $v; say "vowner exit $?"
  # the device's async events about QPs the NIC moved to the error state
  # (verbs_async.c), if Soft-RoCE raised any: shown, not checked
  grep -E 'the NIC moved it' "/run/shared/roshmd-$n.log" | head -3 | sed 's/^/guest: vm1: /'
else
  for _ in $(seq 600); do [ -e /run/shared/vic.ready ] && break; sleep 0.1; done
  ROSHM_TENANT=blue ROSHM_TOKEN=blue-token-0123456789 timeout 500 "$SR" victim & v=$!
  for _ in $(seq 600); do [ -e /run/shared/vic.streaming ] && break; sleep 0.1; done
  sleep 1
  # Rounds until a reset held some of the victim's WRs and posted them
  # again (whether any of them follow the racer's refused WR on the QP is
  # up to timing): each round, a region of VM1 withdrawn under the racer.
  peers() { "$B/client-lib/tools/roshmctl" -s /run/roshm/roshmd.sock --json peers; }
  num() { grep -oE "\"$1\": *[0-9]+" | grep -oE '[0-9]+$' | head -1; }
  for k in $(seq 0 7); do
    timeout 120 "$SR" racer "$k" || say "racer $k exit $?"
    p=$(peers | num reposted)
    [ "${p:-0}" -gt 0 ] && touch /run/shared/reset.enough
    touch "/run/shared/cycle$k.done"
    [ -e /run/shared/reset.enough ] && break
  done
  say "racer rounds: $((k + 1))"
  wait $v; say "victim exit $?"
  j=$(peers)
  echo "$j"
  say "verbs resets $(echo "$j" | num resets) reposted $(echo "$j" | num reposted)"
  grep -E "refused an operation|connection to node|completion error" "/run/shared/roshmd-$n.log" | head -5
fi
kill -TERM $RD; wait $RD
say "roshmd exit $?"
