#!/bin/bash
# make bench, issue 14: unmodified perftest through libroshm-verbs (roshm0,
# carried by roshmd over the verbs transport on rxe0) beside the same perftest
# natively on rxe0, between the same two Soft-RoCE VMs in the same run,
# alternating (native first in odd trials, roshm0 first in even ones). VM1
# runs the servers, VM2 the clients; perf/verbs_compat.py turns VM2's outputs
# into the verbs_compat_* metrics of bench-results.json.
n=$1
B=$(cat /run/shared/build)
TRIALS=${TRIALS:-3}
. "$(dirname "$0")/guest_common.sh"
guest_net "$n"
# Both sides post work in the ping-pong tests: both pollers spin while work is
# in flight and 5 ms after (longer than a round trip under TCG), as perftest
# itself spins, yielding their CPU meanwhile (idle_yield).
# BENCH_DATAPLANE (run2.sh) replaces the dataplane group, to try another
# idle policy by hand
DP='dataplane: { idle = "adaptive"; idle_spin_us = 5000; inflight_sleep_bytes = 65536; idle_yield = true; };'
[ -s /run/shared/dataplane ] && DP=$(cat /run/shared/dataplane)
# perftest on roshm0 runs on the poller's CPU (lcore 1 is CPU 1) and yields
# to it at each post and empty poll (ROSHM_VERBS_YIELD), as the poller
# yields to perftest while it spins idle (idle_yield): one CPU of each VM
# spins, as natively, and the other is the kernel's (docs/performance.md).
# BENCH_ROSHM0_WRAP (run2.sh) replaces it ("": perftest anywhere, no yield)
ROSHM0_WRAP=(ROSHM_VERBS_YIELD=1 taskset -c 1)
[ -e /run/shared/roshm0_wrap ] && read -ra ROSHM0_WRAP < /run/shared/roshm0_wrap
guest_conf "$n" 'registry: { dir = "/run/shared/registry"; revalidate_ms = 500; };
'"$DP"'
transport: { verbs: { enabled = true; device = "rxe0"; secret_file = "/run/shared/secret"; }; };'
guest_roshmd "$n"
mkdir -p /run/shared/vc
i=0
one() {   # kind dev tool args... (dev busy: rxe0 beside a busy loop)
  local kind=$1 dev=$2 t=$3 sp= v=native
  shift 3
  [ "$dev" = roshm0 ] && v=roshm
  # "busy": native perftest beside a busy loop in each VM where roshm has a
  # poller spinning through the test (both for the ping-pong, the client's
  # for the rest): the CPU the poller takes from perftest, the kernel and
  # qemu on two host cores, measured alone (not a target).
  if [ "$dev" = busy ]; then
    dev=rxe0 v=busy
    if [ "$n" = 2 ] || [ "$kind" = write_lat ]; then
      bash -c 'while :; do :; done' &
      sp=$!
    fi
  fi
  # The figure perf/verbs_compat.py takes: awk field of the result line.
  local f=5 line
  [ "$kind" = bw_64k ] && f=4
  # -F: a report even when the clock calibration fails under TCG (both sides
  # alike). A run whose figure is then inf, nan or 0 measured nothing: run it
  # again, up to 4 times (both VMs read the client's output, so both decide
  # alike; native ib_atomic_lat printed inf in most of one run's trials).
  for try in 1 2 3 4; do
    i=$((i + 1))
    perf_pair $i "$dev" "$1" -F "${@:2}"
    line=$(grep -E '^ +[0-9]+ +[0-9]+ ' "/run/shared/cli.$i" 2>/dev/null | head -1)
    [ -n "$line" ] || break   # no result at all: a failure, said above
    echo "$line" | awk -v f=$f '{ v = $f } END { exit !(v ~ /inf|nan/ || v + 0 <= 0) }' || break
    [ "$n" = 2 ] && echo "guest: $kind $v trial $t: no finite figure (clock calibration), again"
  done
  [ -n "$sp" ] && { kill "$sp"; wait "$sp" 2>/dev/null; }
  if [ "$n" = 2 ]; then
    [ -n "$PAIR_OK" ] && cp "/run/shared/cli.$i" "/run/shared/vc/$kind-$v-$t.txt"
    echo "guest: $kind $v trial $t: $(grep -E '^ +[0-9]+ +[0-9]+ ' "/run/shared/cli.$i" | head -1 | tr -s ' ')"
  fi
}
for t in $(seq "$TRIALS"); do
  devs="rxe0 roshm0"
  [ $((t % 2)) = 0 ] && devs="roshm0 rxe0"
  for d in $devs; do
    one write_lat "$d" "$t" ib_write_lat -s 64 -n 200 -F
    one read_lat "$d" "$t" ib_read_lat -s 64 -n 200 -F
    one atomic_lat "$d" "$t" ib_atomic_lat -n 200 -F
    one msg_rate "$d" "$t" ib_write_bw -s 64 -n 2000 -F
    one bw_64k "$d" "$t" ib_write_bw -s 65536 -n 200 -F
  done
  one write_lat busy "$t" ib_write_lat -s 64 -n 200 -F
  one read_lat busy "$t" ib_read_lat -s 64 -n 200 -F
done
if [ "$n" = 2 ]; then
  python3 "$(dirname "$0")/../../perf/verbs_compat.py" /run/shared/vc /run/shared/bench.json \
    > /run/shared/bench.out 2>&1
  echo "guest: verbs_compat.py exit $?"
  cat /run/shared/bench.out
fi
kill -TERM $RD; wait $RD
echo "guest: roshmd exit $?"
