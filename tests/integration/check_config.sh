#!/usr/bin/env bash
# roshmd --check-config: the sample passes; a bad file fails with file:line.
set -u
roshmd=$1; src=$2
. "$(dirname "$0")/../lib/cleanup.sh"
fail() { echo "FAIL: $*"; exit 1; }
w=$(th_tmpdir config)
prefix=$(th_prefix cc)
trap 'th_eal_rm "$prefix"; th_rmdir "$w"' EXIT
out=$("$roshmd" --check-config "$src/config/roshmd.conf" 2>&1) || fail "sample config rejected: $out"
out=$("$roshmd" --check-config "$src/config/local-demo/node-a.conf" 2>&1) || fail "demo config rejected: $out"
# the sample says it lists every key: each key of roshmd's schema
# (dataplane/config.c) is set or shown commented out in it
missing=$(python3 - "$src/dataplane/config.c" "$src/config/roshmd.conf" <<'PY'
import re, sys
keys = re.findall(r'\{ "([a-z_.]+)", K_(\w+),', open(sys.argv[1]).read())
sample = open(sys.argv[2]).read()
print(" ".join(k for k, t in keys if t != "GROUP" and not re.search(
    r"^\s*#?\s*" + re.escape(k.split(".")[-1]) + r"\s*=", sample, re.M)))
PY
)
[[ -z $missing ]] || fail "config/roshmd.conf does not show these keys: $missing"
t=$w/bad.conf
printf 'node = "x";\ndataplane: {\n  burst = 0;\n};\n' > "$t"
out=$("$roshmd" --check-config "$t" 2>&1); rc=$?
[[ $rc -eq 1 ]] || fail "bad config: exit $rc, expected 1"
[[ "$out" == *"$t:3: 'dataplane.burst' = 0 is out of range"* ]] || fail "bad config message: $out"
printf 'colour = "blue";\n' > "$t"
out=$("$roshmd" --check-config "$t" 2>&1) && fail "unknown key accepted"
[[ "$out" == *"$t:1: unknown key 'colour'"* ]] || fail "unknown key message: $out"
# a tenant token left as an example's placeholder is refused
printf 'tenants = ( { name = "default"; token = "replace-me"; } );\n' > "$t"
out=$("$roshmd" --check-config "$t" 2>&1) && fail "placeholder token accepted"
[[ "$out" == *"$t:1:"*"token is a placeholder"* ]] || fail "placeholder token message: $out"
# verbs enabled where there is no RDMA device: a clear error, exit 1
n=5
if ! ls /sys/class/infiniband/* >/dev/null 2>&1; then
  d=$w/verbs
  mkdir "$d"
  head -c 32 /dev/urandom | base64 > "$d/secret"
  cat > "$d/r.conf" <<CONF
node = "n1";
socket = "$d/r.sock";
eal = [ "--no-huge", "-m", "64", "--no-pci", "--no-shconf", "--file-prefix", "$prefix",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
registry: { dir = "$d/reg"; };
transport: { verbs: { enabled = true; secret_file = "$d/secret"; }; };
CONF
  out=$(timeout 30 "$roshmd" -c "$d/r.conf" 2>&1); rc=$?
  [[ $rc -eq 1 ]] || fail "verbs without a device: exit $rc, expected 1: $out"
  [[ "$out" == *"verbs: no RDMA device"* ]] || fail "verbs without a device: $out"
else
  echo "check_config: this machine has RDMA devices: the no-device case is not run"; n=4
fi
echo "check_config: $n passed, 0 failed"
