#!/usr/bin/env bash
# Soft-RoCE smoke test: two qemu VMs (TCG) linked by a socket netdev on
# loopback, rxe0 on eth0 in each, perftest's ib_read_lat between them over
# real RoCE v2. Proves the VM kit that the verbs transport tests build on.
#   smoke.sh BUILD_DIR
set -uo pipefail
B=$(cd "${1:-build}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
for t in qemu-system-x86_64 busybox cpio depmod ib_read_lat rdma; do
  command -v "$t" >/dev/null || { echo "softroce: skipped: $t missing (make deps installs it)"; exit 77; }
done
KIT=$B/softroce/kit
mkdir -p "$KIT"
"$here/kit.sh" "$KIT" || { echo "softroce: cannot build the VM kit"; exit 1; }
W=$B/softroce/run-$$
mkdir -p "$W"
port=$((24000 + $$ % 1000))
"$here/vm.sh" "$KIT" "$W/vm1.log" "$here/guest_perftest.sh" 1 listen "$port" 52:54:00:00:01:01 &
vm1=$!
sleep 1
"$here/vm.sh" "$KIT" "$W/vm2.log" "$here/guest_perftest.sh" 2 connect "$port" 52:54:00:00:01:02 &
vm2=$!
ok=0
for _ in $(seq 240); do
  kill -0 $vm1 2>/dev/null || kill -0 $vm2 2>/dev/null || break
  sleep 0.5
done
kill $vm1 $vm2 2>/dev/null; wait $vm1 $vm2 2>/dev/null
line=$(grep -E '^ 64 +200 ' "$W/vm2.log" | head -1)
if [[ -n "$line" ]] && grep -q 'state ACTIVE' "$W/vm1.log"; then
  echo "softroce: ib_read_lat -s 64 between two VMs over rxe:"
  echo "  #bytes #iterations t_min t_max t_typical t_avg ... [usec]"
  echo " $line"
  echo "softroce: 1 passed, 0 failed"
  rm -rf "$W"
  exit 0
fi
echo "softroce: FAILED; VM consoles:"
echo "---- vm1 ----"; cat "$W/vm1.log"
echo "---- vm2 ----"; cat "$W/vm2.log"
exit 1
