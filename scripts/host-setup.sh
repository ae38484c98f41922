#!/usr/bin/env bash
# Host preparation for tests, demo and bench. As root: reserve 2 MiB huge
# pages (so the hugetlb configurations run) and create /run/roshm. Without
# root nothing changes; roshm falls back to 4 KiB pages and tests that need
# huge pages say they are skipped.
set -u
if [[ $(id -u) -eq 0 ]]; then
  want=256
  have=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo 0)
  if (( have < want )); then
    echo "$want" > /proc/sys/vm/nr_hugepages 2>/dev/null || true
  fi
  mkdir -p /run/roshm
fi
exit 0
