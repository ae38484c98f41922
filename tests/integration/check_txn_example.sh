#!/usr/bin/env bash
# The transactions example (client-lib/examples/txn_transfer.c, docs/guide.md)
# as the guide runs it: two roshmd nodes with the tcp transport
# (scripts/twonode.sh, the demo's: network namespaces as root, else
# loopback), the owner pod on node a, two writer pods on node b moving money
# between accounts with transactions. The owner's consistent snapshots must
# all show the same total and each writer's balances must read back as it
# committed them. Then the same with plain WRITEs, where the owner must see
# money in flight: the check can tell the two apart.
#   check_txn_example.sh SRC BUILD
set -u
src=$1 build=$2
. "$src/tests/lib/cleanup.sh"
d=$(th_tmpdir txnex)
TN_PREFIX=$(th_prefix txnex)
if [[ $(id -u) -ne 0 ]]; then
  # loopback: two ports nothing listens on now
  TN_PORT_A=$(th_ports 2) || { echo "check_txn_example: skipped: no python3 for free ports"; exit 77; }
  TN_PORT_B=$((TN_PORT_A + 1))
fi
. "$src/scripts/twonode.sh"
pids=()
cleanup() {
  for p in "${pids[@]}"; do th_stop "$p"; done
  twonode_down > /dev/null 2>&1
  th_eal_rm "$TN_PREFIX-a"
  th_eal_rm "$TN_PREFIX-b"
  th_rmdir "$d"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$d"/*.out "$d"/node-*.log; do [[ -f $f ]] && { echo "== $f"; tail -20 "$f"; }; done; exit 1; }
ex=$build/client-lib/examples/txn-transfer
twonode_up "$build" "$d" || fail "roshmd did not start"
echo "check_txn_example: $TN_MODE"

# run MODE NAME WRITERS TRANSFERS: owner on node a, writers on node b; the
# owner's exit status in $owner_rc, the writers' must be 0
run() {
  local mode=$1 name=$2 nw=$3 n=$4 w wp=()
  ROSHM_SOCK=$SOCK_A bg_a "$ex" owner -r "$name" -w "$nw" -n "$n" > "$d/$name-owner.out" 2>&1
  local op=$BG_PID
  pids+=("$op")
  for ((w = 0; w < nw; w++)); do
    ROSHM_SOCK=$SOCK_B bg_b "$ex" writer -r "$name" $mode "$w" > "$d/$name-writer$w.out" 2>&1
    wp+=("$BG_PID")
    pids+=("$BG_PID")
  done
  for w in "${wp[@]}"; do wait "$w" || fail "$name: a writer failed"; done
  wait "$op"; owner_rc=$?
  pids=()
  cat "$d/$name-owner.out" "$d"/"$name"-writer*.out | sed 's/^/    /'
}

run "" accounts 2 1000
[[ $owner_rc == 0 ]] || fail "with transactions the owner saw money in flight (exit $owner_rc)"
grep -q "every total 16000; 2 writers x 1000 transfers applied" "$d/accounts-owner.out" ||
  fail "owner output"
n=$(sed -n 's/^owner: [0-9]* consistent snapshots (\([0-9]*\) during the transfers).*/\1/p' \
    "$d/accounts-owner.out")
(( ${n:-0} >= 10 )) || fail "only ${n:-no} snapshots taken during the transfers: the check saw too little"

run --plain plain 1 60
[[ $owner_rc == 1 ]] || fail "with plain WRITEs the owner saw no money in flight (exit $owner_rc)"
grep -q "wrong: money was in flight" "$d/plain-owner.out" || fail "plain: owner output"

twonode_down || fail "a roshmd did not stop cleanly"
echo "check_txn_example: 2 passed, 0 failed"
