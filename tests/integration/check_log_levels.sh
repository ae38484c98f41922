#!/usr/bin/env bash
# Log types per component: an EAL --log-level for one roshm.* type sets that
# component's level and no other's; log.level sets the rest (and only
# them: SIGHUP with a new log.level leaves the EAL's choice alone). Every
# line names its type. A run with log.level = debug first shows that each
# component has debug lines to show.
#   check_log_levels.sh ROSHMD ROSHMCTL ROSHM_PERF
set -u
roshmd=$1 ctl=$2 perf=$3
. "$(dirname "$0")/../lib/cleanup.sh"
d=$(th_tmpdir loglevels)
prefix=$(th_prefix ll)
port=$(th_ports 2) || exit 1
pid=
trap 'th_stop "$pid"; th_eal_rm "$prefix"; th_rmdir "$d"' EXIT
fail() { echo "FAIL: $*"; [[ -f "$d/log" ]] && cat "$d/log"; exit 1; }
head -c 32 /dev/urandom | base64 > "$d/secret"

# conf LOG_LEVEL EAL_EXTRA: a roshmd with the tcp transport on loopback
conf() {
  cat > "$d/r.conf" <<CONF
node = "ll";
socket = "$d/r.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--no-shconf", "--file-prefix", "$prefix",
        "--log-level", "lib.eal:error", "--no-telemetry"$2 ];
registry: { dir = "$d/reg"; };
admin: { token_file = "$d/admin.token"; };
transport: { tcp: { enabled = true; listen = "127.0.0.1"; port = $port; secret_file = "$d/secret"; }; };
log: { level = "$1"; };
CONF
}
start() {
  : > "$d/log"
  "$roshmd" -c "$d/r.conf" > "$d/log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q "ready: node ll" "$d/log" 2>/dev/null && return; kill -0 $pid || break; sleep 0.1; done
  [[ -S $d/r.sock ]] || fail "roshmd did not start"
}
stop() { kill -TERM "$pid"; wait "$pid"; local rc=$?; pid=; [[ $rc = 0 ]] || fail "roshmd exit $rc"; }
# work for every component: a tcp connection (roshm.tcp), an admin request
# (roshm.control), a client that attaches (roshm.control) and its work
tcp_poke() { exec 3<>"/dev/tcp/127.0.0.1/$port" && exec 3>&-; sleep 0.3; }
admin() { "$ctl" -s "$d/r.sock" --admin-token-file "$d/admin.token" status > /dev/null || fail "roshmctl status"; }
client() { "$perf" -s "$d/r.sock" -t 1 -n 100 sweep 64 > "$d/perf.log" 2>&1 || fail "roshm-perf: $(tail -3 "$d/perf.log")"; }
has() { grep -qE "$1" "$d/log"; }
TCP_DEBUG='^roshm\.tcp: tcp: connection from 127\.0\.0\.1:[0-9]+: handshake$'
CTL_DEBUG="^roshm\.control: admin 'status' from pid"
REG_DEBUG='^roshm\.registry: registry: publishing node ll: done$'
n=0

# 1. log.level = debug: every component has its debug lines, each line its type
conf debug ""
start; tcp_poke; admin; client; stop
for re in "$TCP_DEBUG" "$CTL_DEBUG" "$REG_DEBUG" '^roshm\.poller: poller running'; do
  has "$re" || fail "log.level = debug: no line matching $re"
done
bad=$(grep -vE '^(roshm\.(control|poller|tcp|verbs|registry): |roshmd: from the environment|TELEMETRY|EAL)' "$d/log")
[[ -z $bad ]] || fail "lines without their log type: $bad"
n=$((n + 1))

# 2. --log-level roshm.tcp:debug with log.level = info: tcp's debug lines only
conf info ', "--log-level", "roshm.tcp:debug"'
start; tcp_poke; admin; client
has "$TCP_DEBUG" || fail "roshm.tcp:debug: no tcp debug line"
has "$CTL_DEBUG" && fail "roshm.tcp:debug: control's debug lines too"
has "$REG_DEBUG" && fail "roshm.tcp:debug: registry's debug lines too"
has '^roshm\.control: client [0-9]+ attached' || fail "log.level = info: no info line of control"
n=$((n + 1))

# 3. SIGHUP with log.level = error: control goes quiet, tcp stays at debug
sed -i 's/level = "info"/level = "error"/' "$d/r.conf"
kill -HUP "$pid"
for _ in $(seq 50); do has 'SIGHUP: reloaded .*log.level=error' && break; sleep 0.1; done
has 'SIGHUP: reloaded .*log.level=error' || fail "SIGHUP: not reloaded"
mark=$(wc -l < "$d/log")
tcp_poke; client
after=$(tail -n +"$((mark + 1))" "$d/log")
grep -qE "$TCP_DEBUG" <<< "$after" || fail "after SIGHUP: tcp lost the EAL's debug level"
grep -qE '^roshm\.control: client [0-9]+ attached' <<< "$after" && fail "after SIGHUP to error: control still logs info"
stop
n=$((n + 1))

# 4. a regex for registry (the EAL's REGEX,LEVEL form), log.level = warning
conf warning ', "--log-level", "^roshm[.]reg,debug"'
start; tcp_poke; admin; client; stop
has "$REG_DEBUG" || fail "regex for registry: no registry debug line"
has "$TCP_DEBUG" && fail "regex for registry: tcp's debug lines too"
has '^roshm\.control: version .* ready' && fail "log.level = warning: control's info lines still there"
n=$((n + 1))
echo "check_log_levels: $n passed, 0 failed"
