#!/usr/bin/env bash
# The last test of a run: nothing the run started may outlive it. Fails when
# a process whose command line names one of this run's directories (roshmd,
# etcd), a /tmp/roshm-test-TAG-* directory, an EAL runtime directory of a
# TAG-* file prefix or a TAG-* network namespace is left, prints what it found, and removes it so the next run starts clean.
# TAG (ROSHM_TEST_TAG) is set by meson per build directory: other builds on
# the same machine (other worktrees, a sanitizer build) are not looked at.
set -u
tag=${ROSHM_TEST_TAG:?ROSHM_TEST_TAG is set by meson test}
bad=0
pids=()
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [[ $pid == "$$" ]] && continue
  cmd=$(tr '\0' ' ' 2>/dev/null < "$p/cmdline") || continue
  if [[ $cmd == *"/tmp/roshm-test-$tag-"* ]]; then
    state=$(awk '/^State:/ { print $2 $3 }' "$p/status" 2>/dev/null)
    echo "LEFT: process $pid ($state): $cmd"
    pids+=("$pid")
    bad=1
  fi
done
for pid in "${pids[@]}"; do
  kill -CONT "$pid" 2>/dev/null
  kill -KILL "$pid" 2>/dev/null
done
if [[ ${ROSHM_TEST_KEEP:-0} == 0 ]]; then
  for d in /tmp/roshm-test-"$tag"-*; do
    [[ -e $d ]] || continue
    echo "LEFT: directory $d"
    rm -rf "$d"
    bad=1
  done
else
  echo "check_leftovers: ROSHM_TEST_KEEP is set: directories are kept on purpose, not checked"
fi
# EAL runtime directories of this run's --file-prefix (harness: TAG-NAME-PID)
for d in /var/run/dpdk/"$tag"-* "${XDG_RUNTIME_DIR:-/tmp}"/dpdk/"$tag"-*; do
  [[ -e $d ]] || continue
  echo "LEFT: EAL runtime directory $d"
  rm -rf "$d"
  bad=1
done
if command -v ip >/dev/null; then
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^$tag-"); do
    echo "LEFT: network namespace $ns"
    ip netns del "$ns" 2>/dev/null
    bad=1
  done
fi
if (( bad )); then
  echo "check_leftovers: 0 passed, 1 failed (the leftovers above are now removed)"
  exit 1
fi
echo "check_leftovers: nothing left by run $tag: 1 passed, 0 failed"
