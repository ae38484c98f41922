#!/usr/bin/env bash
# Which roshmd serves a socket is decided by a lock that no pod can hold.
# Every tenant pod mounts the socket's directory (read-only), and flock()
# needs only a read-only descriptor: a lock there ("<socket>.lock", before)
# let any pod running as root keep roshmd from starting again after a
# restart, for every tenant of the node. The lock lives in the admin token's
# directory now. Checked with real roshmd processes:
#  1. a "pod" holding flock on every file and on the socket's directory
#     itself does not keep roshmd from starting, and the lock is in the
#     admin token's directory;
#  2. a second roshmd of the same socket refuses to start (the lock works),
#     and leaves the registry as the first one made it: its node record and
#     the region a client of it holds (a second roshmd used to delete the
#     region records as its own leftovers, put its node record over the
#     first one's and delete it on its way out, before it found the lock);
#  3. an empty directory at the socket path (what kubelet makes for a pod's
#     subPath mount of a name that does not exist) is removed; a non-empty
#     one is reported as such, not as "another roshmd".
#   check_socket_lock.sh ROSHMD ROSHM_PERF
set -u
roshmd=$1 perf=$2
. "$(dirname "$0")/../lib/cleanup.sh"
name=check_socket_lock
command -v flock >/dev/null || { echo "$name: skipped: flock (util-linux) missing"; exit 77; }
d=$(th_tmpdir sock-lock)
prefix=$(th_prefix sl)
pid= spid=
cleanup() {
  th_stop "$spid"
  th_stop "$pid"
  th_eal_rm "$prefix"; th_eal_rm "${prefix}2"
  th_rmdir "$d"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$d"/*.log; do [[ -f $f ]] && { echo "== $f"; tail -n 20 "$f"; }; done; exit 1; }
conf() {   # conf FILE PREFIX
  cat > "$1" <<CONF
node = "lock-node";
socket = "$d/run/r.sock";
eal = [ "--no-huge", "-m", "64", "--no-pci", "--no-shconf", "--file-prefix", "$2",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
registry: { dir = "$d/reg"; secret_file = "$d/reg.secret"; };
admin: { token_file = "$d/admin/admin.token"; };
CONF
}
start() {   # start LOG: roshmd in the background, its socket awaited (the pod's fds closed)
  "$roshmd" -c "$d/r.conf" > "$d/$1" 2>&1 3<&- 4<&- 5<&- 6<&- &
  pid=$!
  for _ in $(seq 100); do [[ -S $d/run/r.sock ]] && return 0; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  return 1
}
stop() { th_stop "$pid"; pid=; }
# one registry key for all (each would make its own otherwise, and the
# second could not read the first one's records to remove them)
head -c 32 /dev/urandom | base64 > "$d/reg.secret"
conf "$d/r.conf" "$prefix"
mkdir -p "$d/run"
# the hostile pod (this shell, through read-only descriptors): exclusive
# flocks on the old lock name, on two more names roshmd might use there, and
# on the directory itself, before roshmd starts
: > "$d/run/r.sock.lock"; : > "$d/run/r.lock"; : > "$d/run/roshmd.lock"
exec 3<"$d/run/r.sock.lock" 4<"$d/run/r.lock" 5<"$d/run/roshmd.lock" 6<"$d/run"
for fd in 3 4 5 6; do flock -x -n $fd || fail "the pod could not take its lock on fd $fd"; done
start roshmd1.log || fail "roshmd did not start while a pod holds locks in the socket's directory"
ls "$d"/admin/roshmd-*.lock >/dev/null 2>&1 || fail "the lock is not in the admin token's directory"
echo "ok: roshmd starts while a pod holds flocks on the socket directory's files"
# a client of the first holds a region
"$perf" -s "$d/run/r.sock" serve held 65536 > "$d/serve.log" 2>&1 3<&- 4<&- 5<&- 6<&- &
spid=$!
for _ in $(seq 100); do [[ -f $d/reg/regions/default/held.json ]] && break; sleep 0.1; done
[[ -f $d/reg/regions/default/held.json ]] || fail "roshm-perf serve: no region record"
records() { cat "$d/reg/nodes/lock-node.json" "$d/reg/regions/default/held.json" 2>&1 | md5sum; }
before=$(records)
# the lock works: a second roshmd of the same socket stays out
conf "$d/r2.conf" "${prefix}2"
out=$(timeout 30 "$roshmd" -c "$d/r2.conf" 2>&1 3<&- 4<&- 5<&- 6<&-); rc=$?
[[ $rc -ne 0 && "$out" == *"another roshmd holds its lock file"* ]] ||
  fail "a second roshmd of the same socket: exit $rc: $out"
[[ -S $d/run/r.sock ]] || fail "the second roshmd removed the first one's socket"
[[ -f $d/reg/nodes/lock-node.json ]] || fail "the second roshmd deleted the first one's node record"
[[ -f $d/reg/regions/default/held.json ]] || fail "the second roshmd deleted the first one's region record"
[[ $(records) == "$before" ]] || fail "the second roshmd changed the first one's records"
# the same socket spelled another way is the same lock
sed "s|$d/run/r.sock|$d/run/./r.sock|" "$d/r2.conf" > "$d/r3.conf"
grep -q "run/./r.sock" "$d/r3.conf" || fail "r3.conf"
out=$(timeout 30 "$roshmd" -c "$d/r3.conf" 2>&1 3<&- 4<&- 5<&- 6<&-); rc=$?
[[ $rc -ne 0 && "$out" == *"another roshmd holds its lock file"* ]] ||
  fail "a second roshmd of the same socket spelled $d/run/./r.sock: exit $rc: $out"
[[ -S $d/run/r.sock ]] || fail "the third roshmd removed the first one's socket"
[[ $(records) == "$before" ]] || fail "the third roshmd changed the first one's records"
echo "ok: a second roshmd of the same socket refuses to start, however the path is spelled, and leaves the first one's records alone"
th_stop "$spid"; spid=
stop
# an empty directory at the socket path goes; a full one is named
rm -f "$d/run/r.sock"; mkdir "$d/run/r.sock"
start roshmd2.log || fail "roshmd did not start over an empty directory at its socket path"
echo "ok: an empty directory at the socket path is removed"
stop
rm -f "$d/run/r.sock"; mkdir -p "$d/run/r.sock/x"
out=$(timeout 30 "$roshmd" -c "$d/r.conf" 2>&1 3<&- 4<&- 5<&- 6<&-); rc=$?
[[ $rc -ne 0 && "$out" == *"a directory that cannot be removed"* && "$out" != *"another roshmd"* ]] ||
  fail "a non-empty directory at the socket path: exit $rc: $out"
echo "ok: a directory that cannot be removed is reported as such"
echo "$name: 4 passed, 0 failed"
