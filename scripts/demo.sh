#!/usr/bin/env bash
# make demo: start roshmd, run two example pods that share a region, show
# what happened, stop everything, end with "demo: OK".
set -euo pipefail
B=${1:-build}
D=/tmp/roshm-demo
rm -rf "$D"; mkdir -p "$D"
pid=
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; }
trap cleanup EXIT

echo "demo: starting roshmd (node-a, local transport, file registry in $D/registry)"
"$B/dataplane/roshmd" -c config/local-demo/node-a.conf >"$D/roshmd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $D/node-a.sock ]] && break; sleep 0.1; done
[[ -S $D/node-a.sock ]] || { cat "$D/roshmd.log"; echo "demo: FAILED (roshmd did not start)"; exit 1; }
export ROSHM_SOCK=$D/node-a.sock

echo "demo: pod 1 creates region default/board; pod 2 writes records into it"
"$B/client-lib/examples/demo-owner" > "$D/owner.out" &
owner=$!
sleep 0.3
echo "demo: roshmctl regions:"
"$B/client-lib/tools/roshmctl" regions | sed 's/^/    /'
"$B/client-lib/examples/demo-writer" | sed 's/^/    /'
wait "$owner" || { cat "$D/owner.out"; echo "demo: FAILED (owner)"; exit 1; }
head -3 "$D/owner.out" | sed 's/^/    /'
echo "    ..."
tail -2 "$D/owner.out" | sed 's/^/    /'
echo "demo: roshmctl stats:"
"$B/client-lib/tools/roshmctl" stats | sed 's/^/    /'
kill -TERM "$pid"
if wait "$pid"; then pid=; else echo "demo: FAILED (roshmd exit status)"; exit 1; fi
echo "demo: roshmd stopped cleanly"
echo "demo: OK"
