#!/bin/bash
# make bench, in two Soft-RoCE VMs: VM1 serves a region (roshmd, verbs) and
# the perftest servers (passive responders); VM2 runs roshm-perf verbs
# against both, alternating (perf/verbs.c).
n=$1
B=$(cat /run/shared/build)
ITERS=${ITERS:-300} SWEEP=${SWEEP:-50}
. "$(dirname "$0")/guest_common.sh"
guest_net "$n"
# As with perftest, one thread spins on the requester side: VM2's poller
# spins while WRs are in flight and for 5 ms after (idle_spin_us, longer than
# a round trip under TCG), then sleeps; the client sleeps on its CQ eventfd.
# VM1 is the passive responder: its poller sleeps.
if [ "$n" = 1 ]; then IDLE='idle = "adaptive"; idle_spin_us = 0;'
else IDLE='idle = "adaptive"; idle_spin_us = 5000;'; fi
guest_conf "$n" 'registry: { dir = "/run/shared/registry"; };
dataplane: { '"$IDLE"' };
transport: { verbs: { enabled = true; device = "rxe0"; secret_file = "/run/shared/secret"; }; };'
guest_roshmd "$n"
if [ "$n" = 1 ]; then
  "$B/perf/roshm-perf" serve bench-target 1048576 > /run/shared/serve.log 2>&1 &
  SRV=$!
  loop() { while [ ! -e /run/shared/bench.done ]; do "$@" >/dev/null 2>&1; done; }
  loop timeout 120 ib_read_lat -d rxe0 -s 64 -n "$ITERS" -F -p 18515 &
  loop timeout 120 ib_atomic_lat -d rxe0 -n "$ITERS" -F -p 18516 &
  loop timeout 300 ib_read_lat -d rxe0 -a -n "$SWEEP" -F -p 18517 &
  for _ in $(seq 4000); do [ -e /run/shared/bench.done ] && break; sleep 0.2; done
  pkill -f ib_read_lat; pkill -f ib_atomic_lat
  kill $SRV
else
  sleep 2
  "$B/perf/roshm-perf" -s /run/roshm/roshmd.sock --remote default/bench-target -t 7 \
    --spin-us 0 -n "$ITERS" --sweep-iters "$SWEEP" --json /run/shared/bench.json \
    --out /run/shared/bench verbs --peer 198.18.1.1 \
    2>&1 | tee /run/shared/bench.out
  echo "guest: roshm-perf exit ${PIPESTATUS[0]}"
  touch /run/shared/bench.done
fi
kill -TERM $RD; wait $RD
echo "guest: roshmd exit $?"
