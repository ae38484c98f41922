#!/usr/bin/env bash
# roshmd --check-config: the sample passes; a bad file fails with file:line.
set -u
roshmd=$1; src=$2
fail() { echo "FAIL: $*"; exit 1; }
out=$("$roshmd" --check-config "$src/config/roshmd.conf" 2>&1) || fail "sample config rejected: $out"
out=$("$roshmd" --check-config "$src/config/local-demo/node-a.conf" 2>&1) || fail "demo config rejected: $out"
t=$(mktemp)
printf 'node = "x";\ndataplane: {\n  burst = 0;\n};\n' > "$t"
out=$("$roshmd" --check-config "$t" 2>&1); rc=$?
[[ $rc -eq 1 ]] || fail "bad config: exit $rc, expected 1"
[[ "$out" == *"$t:3: 'dataplane.burst' = 0 is out of range"* ]] || fail "bad config message: $out"
printf 'colour = "blue";\n' > "$t"
out=$("$roshmd" --check-config "$t" 2>&1) && fail "unknown key accepted"
[[ "$out" == *"$t:1: unknown key 'colour'"* ]] || fail "unknown key message: $out"
rm -f "$t"
echo "check_config: 2 passed, 0 failed"
