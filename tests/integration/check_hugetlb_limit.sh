#!/usr/bin/env bash
# A pod whose hugetlb cgroup allows no huge page use, on a node that has free
# huge pages (the kubelet gives a pod without a hugepages-2Mi request such a
# limit): roshmd offers huge pages (channel.hugepages "auto"), libroshm's
# hugetlb memfd maps (reservations are not limited) but MAP_POPULATE finds no
# page. libroshm must notice and fall back to 4 KiB pages, not hand roshmd
# memory it refuses ("pages not all allocated": the client could not attach).
# The client runs in a cgroup v1 hugetlb hierarchy with
# hugetlb.2MB.limit_in_bytes = 0 and no reservation limit.
#   check_hugetlb_limit.sh ROSHMD ROSHM_PERF
set -u
roshmd=$1 perf=$2
. "$(dirname "$0")/../lib/cleanup.sh"
name=check_hugetlb_limit
[[ $(id -u) == 0 ]] || { echo "$name: skipped: needs root for a hugetlb cgroup"; exit 77; }
grep -qw hugetlb /proc/cgroups || { echo "$name: skipped: the kernel has no hugetlb cgroup controller"; exit 77; }
free=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
(( ${free:-0} >= 8 )) || { echo "$name: skipped: fewer than 8 free 2 MiB huge pages (make test reserves them)"; exit 77; }
d=$(th_tmpdir hugetlb)
prefix=$(th_prefix hl)
pid= cg= mnt=
cleanup() {
  th_stop "$pid"
  [[ -n $cg && -d $cg ]] && rmdir "$cg" 2>/dev/null
  [[ -n $mnt ]] && umount "$mnt" 2>/dev/null
  th_eal_rm "$prefix"
  th_rmdir "$d"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [[ -f "$d/roshmd.log" ]] && tail -n 20 "$d/roshmd.log"; exit 1; }
# the hugetlb hierarchy: where the host mounted it, or mounted here
root=$(awk '$3 == "cgroup" && $4 ~ /(^|,)hugetlb(,|$)/ { print $2; exit }' /proc/mounts)
if [[ -z $root ]]; then
  mnt=$d/cg
  mkdir -p "$mnt"
  mount -t cgroup -o hugetlb none "$mnt" 2>"$d/mount.err" ||
    { echo "$name: skipped: cannot mount a cgroup v1 hugetlb hierarchy: $(cat "$d/mount.err")"; mnt=; exit 77; }
  root=$mnt
fi
[[ -f $root/hugetlb.2MB.limit_in_bytes ]] || { echo "$name: skipped: no 2 MiB hugetlb controls in $root"; exit 77; }
cg=$root/roshm-test-$$
mkdir "$cg" || fail "mkdir $cg"
echo 0 > "$cg/hugetlb.2MB.limit_in_bytes" || fail "set the cgroup's limit"
cat > "$d/r.conf" <<CONF
node = "hugetlb-node";
socket = "$d/r.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--file-prefix", "$prefix",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
registry: { dir = "$d/reg"; };
admin: { token_file = "$d/admin.token"; };   # its lock too: nothing left in /var/lib/roshm
channel: { hugepages = "auto"; };
CONF
"$roshmd" -c "$d/r.conf" > "$d/roshmd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $d/r.sock ]] && break; sleep 0.1; done
[[ -S $d/r.sock ]] || fail "roshmd did not start"
# control: outside the cgroup the channel gets huge pages
"$perf" -s "$d/r.sock" -t 1 -n 100 sweep 64 > "$d/perf0.log" 2>&1 || fail "roshm-perf outside the cgroup: $(tail -n 3 "$d/perf0.log")"
grep -q "attached: .* hugetlb$" "$d/roshmd.log" || fail "outside the cgroup the channel did not get huge pages"
# inside it: the same client, attached on 4 KiB pages
sh -c 'echo $$ > "$1/tasks" && shift && exec "$@"' sh "$cg" "$perf" -s "$d/r.sock" -t 1 -n 100 sweep 64 > "$d/perf1.log" 2>&1 ||
  fail "roshm-perf in a cgroup without huge pages could not run: $(tail -n 3 "$d/perf1.log")"
n=$(grep -c "attached: .*(4k pages)" "$d/roshmd.log")
(( n >= 1 )) || fail "the client in the cgroup did not attach on 4 KiB pages"
! grep -q "pages not all allocated" "$d/roshmd.log" || fail "roshmd was handed channel memory it refused"
echo "$name: 2 passed, 0 failed"
