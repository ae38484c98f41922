#!/usr/bin/env bash
# Build the libFuzzer targets of tests/fuzz with clang (ASan + UBSan +
# libFuzzer) in their own build directory and run each for SECONDS.
#   fuzz.sh BUILD SECONDS [TARGET...]     (default: every target)
# Each target starts from its checked-in corpus (tests/fuzz/corpus/T) and
# the committed reproducers (tests/fuzz/crashes/T); what it finds new goes
# to BUILD/fuzz-corpus/T, never into the source tree. A crash, a leak, UB or
# a failed property stops that target and fails the run; its reproducer is
# left in BUILD/fuzz-crashes/T/ (docs/testing.md, "make fuzz", says what to do with it).
set -uo pipefail
build=$1 secs=$2
shift 2
src=$(cd "$(dirname "$0")/.." && pwd)
targets=("$@")
if (( ${#targets[@]} == 0 )); then
  targets=(config sqe record tcp_handshake tcp_dial verbs_cm txn_slot tcp_frames control etcd_watch addr rdmacm_wire verbs_meta
           rsocket_wire verbs_frag tcp_dma)
fi
command -v clang-14 >/dev/null || { echo "fuzz: clang-14 missing (make deps installs it)"; exit 1; }
if [[ ! -f $build/build.ninja ]]; then
  CC=clang-14 meson setup "$build" -Dfuzz=true -Dtests=false \
    -Db_sanitize=address,undefined -Db_lundef=false \
    "-Dc_args=-fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
    "-Dc_link_args=-fno-sanitize-recover=undefined" || exit 1
fi
ninja -C "$build" $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}") || exit 1
build=$(cd "$build" && pwd)
# the same leak suppressions as make test-asan (each justified in the file);
# a report fails the target on the spot
export LSAN_OPTIONS="suppressions=$src/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=()
for t in "${targets[@]}"; do
  work=$build/fuzz-corpus/$t crashes=$build/fuzz-crashes/$t
  mkdir -p "$work" "$crashes"
  seeds=("$src/tests/fuzz/corpus/$t")
  [[ -d $src/tests/fuzz/crashes/$t ]] && seeds+=("$src/tests/fuzz/crashes/$t")
  echo "fuzz: $t for $secs s"
  if "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "${seeds[@]}" \
       < /dev/null > "$build/fuzz-$t.log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^stat::new_units_added|^#[0-9]+ +DONE' "$build/fuzz-$t.log" | sed "s/^/fuzz: $t: /"
  else
    echo "fuzz: $t: FAILED; last lines of $build/fuzz-$t.log:"
    tail -60 "$build/fuzz-$t.log"
    for f in "$crashes"/*; do
      [[ -e $f ]] && echo "fuzz: $t: reproducer $f (replay: $build/tests/fuzz/fuzz_$t $f)"
    done
    failed+=("$t")
  fi
done
if (( ${#failed[@]} )); then
  echo "fuzz: ${#targets[@]} target(s), ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s) ran ${secs} s each: ${#targets[@]} passed, 0 failed"
