#!/usr/bin/env bash
# roshmctl against a real roshmd: every command as a table and as --json,
# drain of a tenant's regions, who may do what (the node admin token; a
# tenant's own token for its own clients, regions and drains, by pod too;
# nobody else, root or not), and the exit codes (0 ok, 1 refused,
# 2 usage, 3 unreachable).
#   check_roshmctl.sh ROSHMD ROSHMCTL DEMO_OWNER ROSHM_PERF
set -u
roshmd=$1 ctl=$2 owner=$3 perf=$4
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../lib/cleanup.sh"
fail() { echo "FAIL: $*"; [[ -f "$d/roshmd.log" ]] && tail -20 "$d/roshmd.log"; exit 1; }
command -v python3 >/dev/null || { echo "check_roshmctl: skipped: python3 missing"; exit 77; }
d=$(th_tmpdir ctl)
prefix=$(th_prefix ctl)
pid= opid= pods=
trap 'for p in $pods; do th_stop "$p"; done; th_stop "$opid"; th_stop "$pid"; th_eal_rm "$prefix"; th_rmdir "$d"' EXIT
cat > "$d/r.conf" <<CONF
node = "ctl-node";
socket = "$d/r.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--no-shconf", "--file-prefix", "$prefix",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
registry: { dir = "$d/reg"; };
admin: { token_file = "$d/admin.token"; };
tenants = ( { name = "default"; token = ""; },
            { name = "a"; token = "token-of-a-0123456789"; },
            { name = "b"; token = "token-of-b-0123456789"; } );
CONF
"$roshmd" -c "$d/r.conf" > "$d/roshmd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $d/r.sock ]] && break; sleep 0.1; done
[[ -S $d/r.sock ]] || fail "roshmd did not start"
# a pod owning a region (the demo owner waits for a writer that never comes)
ROSHM_SOCK=$d/r.sock "$owner" > "$d/owner.log" 2>&1 &
opid=$!
for _ in $(seq 100); do grep -q "created region" "$d/owner.log" && break; sleep 0.1; done
c() { "$ctl" -s "$d/r.sock" --admin-token-file "$d/admin.token" "$@"; }
# no admin token at all (root, like a pod running as root), or a tenant's own
nobody() { ROSHM_ADMIN_TOKEN_FILE=/nonexistent "$ctl" -s "$d/r.sock" "$@"; }
as_a() { ROSHM_ADMIN_TOKEN_FILE=/nonexistent "$ctl" -s "$d/r.sock" --as a --token-file "$d/a.token" "$@"; }
echo token-of-a-0123456789 > "$d/a.token"
echo not-the-token-of-a-00 > "$d/bad.token"
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
# tenant a's pods p1 and p2, tenant b's pod: one region each
for spec in "a p1 r1" "a p2 r2" "b p3 r3"; do
  set -- $spec
  ROSHM_SOCK=$d/r.sock ROSHM_TENANT=$1 ROSHM_TOKEN=token-of-$1-0123456789 ROSHM_POD=$2 \
    "$perf" serve "$3" 4096 > "$d/$3.log" 2>&1 &
  pods="$pods $!"
done
for r in r1 r2 r3; do
  for _ in $(seq 100); do grep -q serving "$d/$r.log" && break; sleep 0.1; done
  grep -q serving "$d/$r.log" || fail "pod serving $r did not start: $(cat "$d/$r.log")"
done
# without a credential nothing is allowed, not even status, not even as root
for cmd in status clients regions peers stats drain "drain --tenant b"; do
  nobody $cmd > /dev/null 2>&1; rc=$?
  [[ $rc = 1 ]] || fail "'$cmd' without credentials: exit $rc, expected 1 (refused)"
done
# a wrong tenant token is nobody
ROSHM_ADMIN_TOKEN_FILE=/nonexistent "$ctl" -s "$d/r.sock" --as a --token-file "$d/bad.token" regions \
  > /dev/null 2>&1; rc=$?
[[ $rc = 1 ]] || fail "a wrong tenant token: exit $rc, expected 1"
# tenant a sees its own and only its own
as_a --json regions | python3 -c 'import json,sys; n=sorted(r["name"] for r in json.load(sys.stdin)); assert n == ["a/r1","a/r2"], n' \
  || fail "tenant a's regions listing"
# ... and with a prefix, those of its own whose names begin with it (the
# admin asking as tenant b: b's only); a prefix that is no name is refused
as_a --json regions r2 | python3 -c 'import json,sys; n=[r["name"] for r in json.load(sys.stdin)]; assert n == ["a/r2"], n' \
  || fail "tenant a's regions listing by prefix"
c --json regions r | python3 -c 'import json,sys; n=sorted(r["name"] for r in json.load(sys.stdin)); assert n == ["a/r1","a/r2","b/r3"], n' \
  || fail "the admin's regions listing by prefix"
ROSHM_TENANT=b ROSHM_TOKEN=token-of-b-0123456789 c --json regions r | python3 -c 'import json,sys; n=[r["name"] for r in json.load(sys.stdin)]; assert n == ["b/r3"], n' \
  || fail "a prefix listing as tenant b"
as_a regions 'r/x' > /dev/null 2>&1; rc=$?
[[ $rc = 1 ]] || fail "a prefix that is no name: exit $rc, expected 1 (refused)"
as_a --json clients | python3 -c 'import json,sys; c=json.load(sys.stdin); assert sorted(x["pod"] for x in c) == ["p1","p2"] and {x["tenant"] for x in c} == {"a"}, c' \
  || fail "tenant a's clients listing"
# ... and may not touch another tenant's, nor the node's
for cmd in "drain --tenant b" "drain --region b/r3" "drain --tenant default" drain peers stats; do
  as_a $cmd > /dev/null 2>&1; rc=$?
  [[ $rc = 1 ]] || fail "tenant a: '$cmd': exit $rc, expected 1 (refused)"
done
c --json regions | python3 -c 'import json,sys; n=sorted(r["name"] for r in json.load(sys.stdin)); assert "b/r3" in n and "a/r1" in n, n' \
  || fail "a refused drain changed something"
# a drain that matches nothing says so (roshmd answers ENOENT): not "cannot reach roshmd"
out=$(as_a drain --region a/missing 2>&1); rc=$?
[[ $rc = 1 && $out == *"nothing matched"* ]] || fail "drain of a missing region: exit $rc: $out"
# a tenant drains its own pod's regions: only p1's
as_a drain --pod p1 > /dev/null || fail "tenant a: drain --pod p1: exit $?"
c --json regions | python3 -c 'import json,sys; n=sorted(r["name"] for r in json.load(sys.stdin)); assert n == ["a/r2","b/r3","default/board"], n' \
  || fail "drain --pod p1 drained something else"
# a pod of tenant b with b's pod name p1: a's drain of pod p1 leaves it alone
ROSHM_SOCK=$d/r.sock ROSHM_TENANT=b ROSHM_TOKEN=token-of-b-0123456789 ROSHM_POD=p1 \
  "$perf" serve r4 4096 > "$d/r4.log" 2>&1 &
pods="$pods $!"
for _ in $(seq 100); do grep -q serving "$d/r4.log" && break; sleep 0.1; done
as_a drain --pod p1 > /dev/null 2>&1
c --json regions | python3 -c 'import json,sys; n=sorted(r["name"] for r in json.load(sys.stdin)); assert "b/r4" in n, n' \
  || fail "tenant a drained tenant b's pod"
as_a drain --tenant a > /dev/null || fail "tenant a: drain --tenant a: exit $?"
c drain --tenant b > /dev/null || fail "admin: drain --tenant b: exit $?"
# drain the tenant: returns when done, the region leaves the registry
out=$(c drain --tenant default) || fail "drain: exit $?"
c --json regions | python3 -c 'import json,sys; assert json.load(sys.stdin) == []' || fail "region still listed after drain"
# exit codes
c bogus > /dev/null 2>&1; rc=$?; [[ $rc = 2 ]] || fail "unknown command: exit $rc, expected 2 (usage)"
v=$("$ctl" --version) || fail "--version: exit $?"
[[ $v =~ ^roshmctl\ [0-9]+\.[0-9]+\.[0-9]+\ \(ABI\ [0-9]+\)$ ]] || fail "--version: '$v'"
# bash completion: commands, then drain's options
comp=$(bash -c '. "$1"; COMP_WORDS=(roshmctl dr); COMP_CWORD=1; _roshmctl; echo "${COMPREPLY[*]}";
  COMP_WORDS=(roshmctl drain --p); COMP_CWORD=2; _roshmctl; echo "${COMPREPLY[*]}"' _ "$src/client-lib/tools/roshmctl.bash") ||
  fail "completion script: $comp"
[[ $comp == $'drain\n--pod' ]] || fail "completion: '$comp'"
c > /dev/null 2>&1; rc=$?; [[ $rc = 2 ]] || fail "no command: exit $rc, expected 2"
c status --tenant x > /dev/null 2>&1; rc=$?; [[ $rc = 2 ]] || fail "--tenant without drain: exit $rc"
c drain --tenant a --region b/c > /dev/null 2>&1; rc=$?; [[ $rc = 2 ]] || fail "drain with both: exit $rc"
c drain --pod p --region b/c > /dev/null 2>&1; rc=$?; [[ $rc = 2 ]] || fail "drain --pod with --region: exit $rc"
"$ctl" -s "$d/nope.sock" status > /dev/null 2> "$d/err"; rc=$?
[[ $rc = 3 ]] || fail "no roshmd: exit $rc, expected 3"
grep -q "nope.sock" "$d/err" || fail "unreachable message does not name the socket: $(cat "$d/err")"
# a roshmd that does not answer: roshmctl gives up after 10 s (probes, hooks)
kill -STOP "$pid"
s0=$(date +%s)
c status > /dev/null 2> "$d/err"; rc=$?
kill -CONT "$pid"
(( rc == 1 && $(date +%s) - s0 < 20 )) || fail "a stopped roshmd: exit $rc after $(( $(date +%s) - s0 )) s"
grep -q "timed out" "$d/err" || fail "a stopped roshmd: $(cat "$d/err")"
# SIGHUP reloads tenant tokens and log.level; a file that does not load changes nothing
sed -i 's/token-of-a-0123456789/new-token-of-a-987654321/' "$d/r.conf"
printf 'log: { level = "notice"; };\n' >> "$d/r.conf"
kill -HUP "$pid"
for _ in $(seq 50); do grep -q "SIGHUP: reloaded" "$d/roshmd.log" && break; sleep 0.1; done
grep -q "SIGHUP: reloaded .*log.level=notice tokens of 1 tenant(s)" "$d/roshmd.log" ||
  fail "SIGHUP: $(grep SIGHUP "$d/roshmd.log")"
as_a status > /dev/null 2>&1 && fail "the old token still works after SIGHUP"
echo new-token-of-a-987654321 > "$d/a.token"
as_a status > /dev/null || fail "the new token does not work after SIGHUP"
# ... and each tenant's share of the poller (weight, rate caps): the poller's
# own copy is set before the log says so
printf 'quota: { weight = 2; ops_per_sec = 1000; };\n' >> "$d/r.conf"
n0=$(grep -c "SIGHUP: reloaded" "$d/roshmd.log")
kill -HUP "$pid"
for _ in $(seq 50); do (( $(grep -c "SIGHUP: reloaded" "$d/roshmd.log") > n0 )) && break; sleep 0.1; done
grep "SIGHUP: reloaded" "$d/roshmd.log" | tail -1 | grep -q "quotas of 3 tenant(s)" ||
  fail "SIGHUP with new shares: $(grep SIGHUP "$d/roshmd.log" | tail -1)"
echo 'colour = "blue";' >> "$d/r.conf"
kill -HUP "$pid"
for _ in $(seq 50); do grep -q "running configuration is kept" "$d/roshmd.log" && break; sleep 0.1; done
grep -q "unknown key 'colour'.*running configuration is kept" "$d/roshmd.log" ||
  fail "a bad file on SIGHUP: $(grep SIGHUP "$d/roshmd.log")"
as_a status > /dev/null || fail "a bad file on SIGHUP changed the tokens"
# roshmd leaves cleanly: exit 0 on SIGTERM (a sanitizer report at exit fails here)
th_stop "$opid"; opid=
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=
[[ $rc = 0 ]] || fail "roshmd exit $rc on SIGTERM"
echo "check_roshmctl: 1 passed, 0 failed"
