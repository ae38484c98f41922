#!/usr/bin/env bash
# Build roshm with a sanitizer in its own build directory and run tests there.
#   sanitize.sh asan BUILD   ASan + UBSan (clang-14), every test but the softroce and nosan suites
#   sanitize.sh tsan BUILD   ThreadSanitizer (gcc), the tests that run a roshmd's
#                            control thread and poller together
# A report fails the run however it surfaces: every sanitized process writes
# its report to BUILD/sanitizer-logs/ (log_path), and this script fails when
# that directory is not empty at the end, even if the process that wrote it
# was a roshmd whose test never looked at its exit status. abort_on_error
# also makes the reporting process die at once (SIGABRT), so the test that
# drove it fails on the spot and the harness prints the report beside the
# daemon's log (tests/lib/harness.c, ROSHM_SAN_LOGS).
set -euo pipefail
mode=$1 build=$2
src=$(cd "$(dirname "$0")/.." && pwd)
case $mode in
asan)
  # clang: with gcc 12, UBSan linked beside ASan ignores log_path and
  # reports only on stderr, where a report from a roshmd whose test does not
  # look at its log would go unseen.
  cc=clang-14
  opts=(-Db_sanitize=address,undefined -Db_lundef=false
        "-Dc_args=-fno-sanitize-recover=undefined -fno-omit-frame-pointer"
        "-Dc_link_args=-fno-sanitize-recover=undefined")
  # nosan (tests/meson.build): checks of the sources, manifests and an image
  # built from them, the same in any build, and the registry rate limiter's
  # timing under more patterns (for CI's time)
  tests=(--no-suite softroce --no-suite nosan)
  ;;
tsan)
  cc=gcc
  # RTE_USE_C11_MEM_MODEL: Debian builds DPDK 22.11 for x86 without it, so
  # the inline rte_ring code (control <-> poller command rings) is
  # rte_ring_generic_pvt.h: volatile loads and stores ordered by compiler
  # barriers (x86 is TSO) and a lock cmpxchg in inline assembly, none of
  # which TSan sees as synchronisation: every object handed over through a
  # ring would be reported as a race. Defined here, the same headers select
  # rte_ring_c11_pvt.h (__atomic acquire/release, which TSan understands);
  # the ring layout is the same and both ends are in the binary under test.
  opts=(-Db_sanitize=thread -Db_lundef=false "-Dc_args=-fno-omit-frame-pointer -DRTE_USE_C11_MEM_MODEL")
  tests=(local_ops hostile txn multinode ipv6 telemetry restart metrics check_metrics check_roshmctl check_leftovers)
  ;;
*) echo "usage: $0 asan|tsan BUILD" >&2; exit 2 ;;
esac
if [[ ! -f $build/build.ninja ]]; then
  CC=$cc meson setup "$build" "${opts[@]}"
fi
ninja -C "$build"
logs=$(cd "$build" && pwd)/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
supp=$src/tests/sanitizers
export ROSHM_SAN_LOGS=$logs
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:log_path=$logs/asan"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:abort_on_error=1:log_path=$logs/ubsan"
# history_size=7: the older side of a race keeps its stack in a long-running roshmd.
export TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:history_size=7:log_path=$logs/tsan:suppressions=$supp/tsan.supp"
start=$(date +%s)
rc=0
(cd "$build" && meson test --print-errorlogs --num-processes 1 "${tests[@]}" ${MESON_TEST_ARGS:-}) || rc=$?
echo "sanitize: $mode: meson test exit $rc after $(( $(date +%s) - start )) s"
n=0
for f in "$logs"/*; do
  [[ -e $f ]] || continue
  n=$((n + 1))
  echo "==== sanitizer report $(basename "$f") ===="
  cat "$f"
done
if (( n )); then
  echo "sanitize: $mode: $n sanitizer report(s) above (kept in $logs)"
  rc=1
fi
exit $rc
