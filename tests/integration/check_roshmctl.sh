#!/usr/bin/env bash
# roshmctl against a real roshmd: every command as a table and as --json,
# drain of a tenant's regions, and the exit codes (0 ok, 1 refused,
# 2 usage, 3 unreachable).
#   check_roshmctl.sh ROSHMD ROSHMCTL DEMO_OWNER
set -u
roshmd=$1 ctl=$2 owner=$3
. "$(dirname "$0")/../lib/cleanup.sh"
fail() { echo "FAIL: $*"; [[ -f "$d/roshmd.log" ]] && tail -20 "$d/roshmd.log"; exit 1; }
command -v python3 >/dev/null || { echo "check_roshmctl: skipped: python3 missing"; exit 77; }
d=$(th_tmpdir ctl)
prefix=$(th_prefix ctl)
pid= opid=
trap 'th_stop "$opid"; th_stop "$pid"; th_eal_rm "$prefix"; th_rmdir "$d"' EXIT
cat > "$d/r.conf" <<CONF
node = "ctl-node";
socket = "$d/r.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--no-shconf", "--file-prefix", "$prefix",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
registry: { dir = "$d/reg"; };
CONF
"$roshmd" -c "$d/r.conf" > "$d/roshmd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $d/r.sock ]] && break; sleep 0.1; done
[[ -S $d/r.sock ]] || fail "roshmd did not start"
# a pod owning a region (the demo owner waits for a writer that never comes)
ROSHM_SOCK=$d/r.sock "$owner" > "$d/owner.log" 2>&1 &
opid=$!
for _ in $(seq 100); do grep -q "created region" "$d/owner.log" && break; sleep 0.1; done
c() { "$ctl" -s "$d/r.sock" "$@"; }
out=$(c status) || fail "status: exit $?"
[[ "$out" == *"ctl-node"* ]] || fail "status table: $out"
for cmd in status clients regions peers stats; do
  c --json $cmd > "$d/$cmd.json" || fail "$cmd --json: exit $?"
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$d/$cmd.json" || fail "$cmd --json is not JSON"
  c $cmd > "$d/$cmd.txt" || fail "$cmd: exit $?"
done
python3 - "$d" <<'PY' || fail "json contents"
import json, sys
d = sys.argv[1]
st = json.load(open(f"{d}/status.json")); assert st["node"] == "ctl-node" and st["clients"] == 1, st
cl = json.load(open(f"{d}/clients.json")); assert len(cl) == 1 and cl[0]["tenant"] == "default", cl
rg = json.load(open(f"{d}/regions.json")); assert [r["name"] for r in rg] == ["default/board"], rg
assert json.load(open(f"{d}/peers.json")) == []
assert len(json.load(open(f"{d}/stats.json"))["batch_log2_hist"]) == 12
PY
grep -q "default/board" "$d/regions.txt" || fail "regions table: $(cat "$d/regions.txt")"
grep -q "^name " "$d/regions.txt" || fail "regions table has no header: $(cat "$d/regions.txt")"
# drain the tenant: returns when done, the region leaves the registry
out=$(c drain --tenant default) || fail "drain: exit $?"
c --json regions | python3 -c 'import json,sys; assert json.load(sys.stdin) == []' || fail "region still listed after drain"
# exit codes
c bogus > /dev/null 2>&1; rc=$?; [[ $rc = 1 ]] || fail "unknown command: exit $rc, expected 1"
c > /dev/null 2>&1; rc=$?; [[ $rc = 2 ]] || fail "no command: exit $rc, expected 2"
c status --tenant x > /dev/null 2>&1; rc=$?; [[ $rc = 2 ]] || fail "--tenant without drain: exit $rc"
c drain --tenant a --region b/c > /dev/null 2>&1; rc=$?; [[ $rc = 2 ]] || fail "drain with both: exit $rc"
"$ctl" -s "$d/nope.sock" status > /dev/null 2> "$d/err"; rc=$?
[[ $rc = 3 ]] || fail "no roshmd: exit $rc, expected 3"
grep -q "nope.sock" "$d/err" || fail "unreachable message does not name the socket: $(cat "$d/err")"
# roshmd leaves cleanly: exit 0 on SIGTERM (a sanitizer report at exit fails here)
th_stop "$opid"; opid=
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=
[[ $rc = 0 ]] || fail "roshmd exit $rc on SIGTERM"
echo "check_roshmctl: 1 passed, 0 failed"
