#!/usr/bin/env bash
# Failures under libroshm-verbs, NIC-like (tests/integration/verbs_fail.c):
# between two roshmd nodes (tcp transport, network namespaces) a client on
# node b streams RDMA WRITEs into an MR of a server on node a, and
#   1. the server deregisters the MR (a region withdrawn),
#   2. the server is killed (SIGKILL: a remote pod that dies),
#   3. node a's roshmd is killed (SIGKILL: a peer node down).
# Each time the first failing WR has a remote error status, every WR after
# it (outstanding, or posted later) flushes with IBV_WC_WR_FLUSH_ERR, the QP
# is in the error state, and nothing hangs.
#   check_verbs_failures.sh BUILD_ROOT VERBS_DIR VERBS_FAIL
set -u
unset LD_LIBRARY_PATH   # roshmd gets the system libibverbs; the programs get ours
build=$1 vdir=$2 vfail=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../lib/cleanup.sh"
name=check_verbs_failures
[[ $(id -u) == 0 ]] && command -v ip >/dev/null || { echo "$name: skipped: needs root and ip for network namespaces"; exit 77; }
d=$(th_tmpdir vfail)
TN_PREFIX=$(th_prefix vf)
. "$src/scripts/twonode.sh"
srv=
trap 'th_stop "$srv"; twonode_down >/dev/null 2>&1; th_eal_rm "$TN_PREFIX-a"; th_eal_rm "$TN_PREFIX-b"; th_rmdir "$d"' EXIT
fail() { echo "FAIL: $*"; tail -n 20 "$d"/node-*.log; exit 1; }
twonode_up "$build" "$d" 0 || fail "roshmd nodes did not start"
ca="env LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_A" cb="env LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_B"

# case NAME SERVER_MODE STATUSES [KILL]: KILL is "server" or "node"
n=0
case_() {
  local what=$1 mode=$2 statuses=$3 kill=${4:-} port=$((7700 + n)) cli rc
  n=$((n + 1))
  bg_a $ca "$vfail" server "$mode" "$ADDR_A" "$port" >"$d/$what.server" 2>&1
  srv=$BG_PID
  sleep 0.5
  in_b timeout 90 $cb "$vfail" client "$ADDR_A" "$port" "$statuses" >"$d/$what.client" 2>&1 &
  cli=$!
  if [[ -n $kill ]]; then
    # kill once the server has started serving the client's WRITEs
    for _ in $(seq 100); do grep -q "serving until killed" "$d/$what.server" && break; sleep 0.1; done
    sleep 0.5
    if [[ $kill == server ]]; then kill -KILL "$srv"; else kill -KILL "${TN_PIDS[0]}"; fi
  fi
  wait "$cli"; rc=$?
  [[ $rc == 0 ]] || { cat "$d/$what.client" "$d/$what.server"; fail "$what: client exited $rc"; }
  if [[ $kill != server ]]; then
    wait "$srv"; rc=$?
    [[ $rc == 0 ]] || { cat "$d/$what.server"; fail "$what: server exited $rc"; }
  fi
  srv=
  echo "ok: $what: $(cat "$d/$what.client")"
}
case_ withdrawn dereg REM_ACCESS_ERR
case_ pod-killed hold REM_ACCESS_ERR,RETRY_EXC_ERR server
case_ node-killed hold RETRY_EXC_ERR,REM_ACCESS_ERR node
echo "$name: $n passed, 0 failed"
