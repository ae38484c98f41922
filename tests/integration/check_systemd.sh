#!/usr/bin/env bash
# The systemd unit (packaging/systemd/roshmd.service.in, as meson configured
# it for this install's prefix) starts the roshmd this install puts in
# SBINDIR, passes systemd-analyze
# verify, and roshmd speaks systemd's readiness protocol: READY=1 once it
# serves, RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 on SIGTERM.
#   check_systemd.sh SRC ROSHMD UNIT SBINDIR
set -u
src=$1 roshmd=$2 unit=$3 sbindir=$4
. "$(dirname "$0")/../lib/cleanup.sh"
fail() { echo "FAIL: $*"; [[ -f $d/roshmd.log ]] && tail -5 "$d/roshmd.log"; exit 1; }
command -v python3 >/dev/null || { echo "check_systemd: skipped: python3 missing"; exit 77; }
d=$(th_tmpdir systemd)
prefix=$(th_prefix sd)
pid= rpid=
trap 'th_stop "$pid"; th_stop "$rpid"; th_eal_rm "$prefix"; th_rmdir "$d"' EXIT
n=1
grep -qx "ExecStart=$sbindir/roshmd -c /etc/roshm/roshmd.conf" "$unit" ||
  fail "the unit does not start $sbindir/roshmd: $(grep ^ExecStart "$unit")"
if command -v systemd-analyze >/dev/null; then
  sed "s#$sbindir/roshmd#$roshmd#g; s#/etc/roshm/roshmd.conf#$src/config/roshmd.conf#g" \
    "$unit" > "$d/roshmd.service"
  out=$(systemd-analyze verify --man=no "$d/roshmd.service" 2>&1) || fail "systemd-analyze verify: $out"
  n=2
else
  echo "check_systemd: systemd-analyze missing: the unit is not verified"
fi
# sd_notify: a datagram socket in place of systemd's
python3 - "$d/notify" "$d/got" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
with open(sys.argv[2], "w") as f:
    try:
        while True:
            m = s.recv(4096).decode()
            f.write(m.replace("\n", " ") + "\n")
            f.flush()
            if "STOPPING=1" in m:
                break
    except socket.timeout:
        pass
PY
rpid=$!
for _ in $(seq 50); do [[ -S $d/notify ]] && break; sleep 0.1; done
cat > "$d/r.conf" <<CONF
node = "sd-node";
socket = "$d/r.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--no-shconf", "--file-prefix", "$prefix",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
registry: { dir = "$d/reg"; };
admin: { token_file = "$d/admin.token"; };
CONF
NOTIFY_SOCKET=$d/notify "$roshmd" -c "$d/r.conf" > "$d/roshmd.log" 2>&1 &
pid=$!
wait_for() { for _ in $(seq 100); do grep -q "$1" "$d/got" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
wait_for "READY=1" || fail "no READY=1 from roshmd: $(cat "$d/got" 2>/dev/null)"
grep -q "MAINPID=$pid " "$d/got" || fail "READY without MAINPID=$pid: $(cat "$d/got")"
[[ -S $d/r.sock ]] || fail "READY=1 before the socket listens"
kill -HUP "$pid"
wait_for "RELOADING=1" || fail "no RELOADING=1 on SIGHUP: $(cat "$d/got")"
[[ $(grep -c "READY=1" "$d/got") -ge 2 ]] || { sleep 1; [[ $(grep -c "READY=1" "$d/got") -ge 2 ]]; } ||
  fail "no READY=1 after the reload: $(cat "$d/got")"
kill -TERM "$pid"
wait_for "STOPPING=1" || fail "no STOPPING=1 on SIGTERM: $(cat "$d/got")"
wait "$pid"; rc=$?; pid=
[[ $rc = 0 ]] || fail "roshmd exit $rc on SIGTERM"
wait "$rpid"; rpid=
echo "check_systemd: $n passed, 0 failed"
