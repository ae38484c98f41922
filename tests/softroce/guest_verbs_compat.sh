#!/bin/bash
# Issue 14 on real RoCE v2: unmodified Debian perftest through libroshm-verbs
# between two Soft-RoCE VMs. Each VM runs roshmd with the verbs transport on
# its rxe0 (file registry on the shared directory); the applications see only
# roshm0 (LD_LIBRARY_PATH), roshmd uses the system libibverbs and rxe0. VM1
# runs each test's server, VM2 its client (perftest's own TCP exchange over
# the VMs' link); then verbs_check proves the bytes and atomics.
# The two VMs step through the tests with marker files in /run/shared.
n=$1
B=$(cat /run/shared/build)
V=$B/client-lib/verbs
say() { echo "guest: $*"; }
. "$(dirname "$0")/guest_common.sh"
guest_net "$n"
guest_conf "$n" 'registry: { dir = "/run/shared/registry"; revalidate_ms = 500; };
transport: { verbs: { enabled = true; device = "rxe0"; secret_file = "/run/shared/secret"; }; };'
guest_roshmd "$n"
app() { env LD_LIBRARY_PATH="$V" ROSHM_SOCK=/run/roshm/roshmd.sock "$@"; }
i=0
pair() {
  i=$((i + 1))
  perf_pair $i roshm0 "$@"
  if [ -n "$PAIR_OK" ]; then
    grep -E 'Link type|GID index' "/run/shared/cli.$i" | head -2 | sed 's/^/guest: /'
    say "ok: $* over roshm0: $(grep -E '^ +[0-9]+ +[0-9]+ ' "/run/shared/cli.$i" | head -1 | tr -s ' ')"
  fi
}

pair ib_write_lat -n 50
pair ib_write_lat -n 50 -s 4096
pair ib_read_lat -n 50
pair ib_atomic_lat -n 50
pair ib_atomic_lat -n 50 -A CMP_AND_SWAP
pair ib_write_bw -n 50 -s 65536

# verbs_check: the bytes a WRITE sent are the ones in the owner's buffer
i=$((i + 1))
if [ "$n" = 1 ]; then
  app timeout 240 "$B/tests/verbs_check" server 198.18.1.1 7599 > /run/shared/check.server 2>&1 &
  s=$!
  sleep 1
  touch "/run/shared/go.$i"
  wait $s && say "verbs_check server ok" || { say "FAIL: verbs_check server"; cat /run/shared/check.server; }
  for _ in $(seq 600); do [ -e "/run/shared/done.$i" ] && break; sleep 0.2; done
else
  for _ in $(seq 1200); do [ -e "/run/shared/go.$i" ] && break; sleep 0.2; done
  app timeout 240 "$B/tests/verbs_check" client 198.18.1.1 7599 > /run/shared/check.client 2>&1 &&
    say "verbs_check client ok" || { say "FAIL: verbs_check client"; cat /run/shared/check.client; }
  # the rkeys went over RoCE: this node's roshmd has a verbs peer vm1
  "$B/client-lib/tools/roshmctl" -s /run/roshm/roshmd.sock peers
  touch "/run/shared/done.$i"
fi
kill -TERM $RD; wait $RD
say "roshmd exit $?"
