#!/usr/bin/env bash
# The systemd unit (packaging/systemd/roshmd.service.in, as meson configured
# it for this install's prefix) starts the roshmd this install puts in
# SBINDIR, passes systemd-analyze
# verify, and roshmd speaks systemd's readiness protocol: READY=1 once it
# serves, RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 on SIGTERM.
# Then docs/operations.md's steps for nodes outside Kubernetes, its blocks
# as written (what is replaced to run them on loopback is said below): the
# secrets and TLS files, an etcd with its ETCD_* settings, and two roshmd
# with its roshmd.conf sharing a region between demo-owner and demo-writer;
# its CPUAffinity drop-in resets the unit's CPUs and verifies with the unit.
#   check_systemd.sh SRC ROSHMD UNIT SBINDIR DEMO_OWNER DEMO_WRITER
set -u
src=$1 roshmd=$2 unit=$3 sbindir=$4 owner=$5 writer=$6
. "$(dirname "$0")/../lib/cleanup.sh"
fail() { echo "FAIL: $*"; [[ -f $d/roshmd.log ]] && tail -5 "$d/roshmd.log"; exit 1; }
command -v python3 >/dev/null || { echo "check_systemd: skipped: python3 missing"; exit 77; }
d=$(th_tmpdir systemd)
prefix=$(th_prefix sd)
pid= rpid= etcd_pid= pa= pb= opid=
trap 'th_stop "$opid"; th_stop "$pa"; th_stop "$pb"; th_stop "$etcd_pid"; th_stop "$pid"; th_stop "$rpid"
      th_eal_rm "$prefix"; th_eal_rm "$prefix-a"; th_eal_rm "$prefix-b"; th_rmdir "$d"' EXIT
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
# docs/operations.md, "On a node outside Kubernetes": its blocks marked
# `<!-- check_systemd runs this block: NAME -->`, run as written but for
# /etc/roshm (a scratch root), $HOME (a scratch home: the TLS directory),
# and, to run on loopback, the hosts, ports, node names, data directory and
# EAL arguments (no huge pages); etcd runs as one member.
mkdir -p "$d/doc" "$d/home" "$d/root"
python3 - "$src/docs/operations.md" "$d/doc" <<'PY' || fail "docs/operations.md: blocks for check_systemd"
import re, sys
t = open(sys.argv[1]).read()
got = set()
for m in re.finditer(r'(?m)^( *)<!-- check_systemd runs this block: (\S+) -->\n\1```\w*\n(.*?)^\1```$', t, re.S):
    ind, name, body = m.group(1), m.group(2), m.group(3)
    open(f'{sys.argv[2]}/{name}', 'w').write(''.join(l[len(ind):] if l.startswith(ind) else l
                                                     for l in body.splitlines(True)))
    got.add(name)
need = {'secrets', 'tls', 'roshmd-tls', 'etcd', 'roshmd.conf', 'cpuaffinity'}
if need - got:
    print('missing blocks:', ' '.join(sorted(need - got)))
    sys.exit(1)
PY
# step 5's drop-in for CPUAffinity: systemd adds a drop-in's CPUs to the
# unit's, so it must reset the list (an empty CPUAffinity=) before it names
# the CPUs; with systemd-analyze, the unit with it verifies without a word.
awk '/^CPUAffinity=/ { if (!seen++ && $0 != "CPUAffinity=") bad = 1; if ($0 != "CPUAffinity=") set = 1 }
     END { exit !(NR && !bad && set) }' "$d/doc/cpuaffinity" ||
  fail "docs/operations.md's CPUAffinity drop-in does not reset the unit's CPUs first: $(cat "$d/doc/cpuaffinity")"
grep -qx '\[Service\]' "$d/doc/cpuaffinity" || fail "docs/operations.md's CPUAffinity drop-in has no [Service]"
if [[ -f $d/roshmd.service ]]; then
  mkdir -p "$d/roshmd.service.d"
  cp "$d/doc/cpuaffinity" "$d/roshmd.service.d/cpu.conf"
  out=$(systemd-analyze verify --man=no "$d/roshmd.service" 2>&1) ||
    fail "systemd-analyze verify with the CPUAffinity drop-in: $out"
  [[ -z $out ]] || fail "systemd-analyze verify with the CPUAffinity drop-in: $out"
  rm -r "$d/roshmd.service.d"
fi
n=$((n + 1))
missing=
for t in etcd openssl curl; do command -v $t >/dev/null || missing+=" $t"; done
if [[ -n $missing ]]; then
  echo "check_systemd: docs/operations.md's multi-node steps not run:$missing missing"
else
  etc=$d/root/etc/roshm
  dash() { sed "s#/etc/roshm#$etc#g" "$d/doc/$1" | (cd "$d/home" && HOME=$d/home bash -e) > "$d/$1.log" 2>&1 ||
             fail "docs/operations.md block $1: $(cat "$d/$1.log")"; }
  dash secrets
  dash tls
  dash roshmd-tls
  [[ $(stat -c %a "$etc") == 700 && $(stat -c %a "$etc/cluster.secret") == 600 && $(stat -c %a "$etc/tenants.conf") == 600 &&
     $(stat -c %a "$etc/etcd-tls/client.key") == 600 ]] || fail "the secrets' modes: $(ls -la "$etc" "$etc/etcd-tls")"
  [[ $(stat -c %a "$d/home/roshm-etcd-tls") == 700 ]] || fail "the TLS directory is not 0700"
  tok=$(sed -n 's/.*name = "default"; token = "\([0-9a-f]\{48\}\)".*/\1/p' "$etc/tenants.conf")
  [[ -n $tok ]] || fail "tenants.conf has no token for default: $(cat "$etc/tenants.conf")"
  p=$(th_ports 6) || fail "no free ports"
  cport=$p pport=$((p + 1)) ta=$((p + 2)) tb=$((p + 3)) ma=$((p + 4)) mb=$((p + 5))
  tls=$d/home/roshm-etcd-tls
  # etcd: the doc's settings; one member, on loopback
  env=()
  while IFS= read -r l; do
    [[ $l =~ ^(ETCD_[A-Z_]+)=(.*)$ ]] || continue
    k=${BASH_REMATCH[1]} v=${BASH_REMATCH[2]}
    v=${v//\/etc\/etcd\/tls/$tls}
    v=$(sed -E "s#(0\.0\.0\.0|etcd-[0-9]\.example\.net):2379#127.0.0.1:$cport#g; s#(0\.0\.0\.0|etcd-[0-9]\.example\.net):2380#127.0.0.1:$pport#g" <<< "$v")
    [[ $k == ETCD_INITIAL_CLUSTER ]] && v=${v%%,*}
    [[ $k == ETCD_DATA_DIR ]] && v=$d/etcd-data
    env+=("$k=$v")
  done < "$d/doc/etcd"
  env -i PATH="$PATH" "${env[@]}" etcd > "$d/etcd.log" 2>&1 &
  etcd_pid=$!
  ec="curl -s --max-time 5 --cacert $tls/ca.crt --cert $etc/etcd-tls/client.crt --key $etc/etcd-tls/client.key"
  for _ in $(seq 100); do $ec -f "https://127.0.0.1:$cport/health" > /dev/null 2>&1 && break; sleep 0.1; done
  $ec -f "https://127.0.0.1:$cport/health" > /dev/null || fail "etcd with the doc's settings: $(tail -5 "$d/etcd.log")"
  curl -s --max-time 5 --cacert "$tls/ca.crt" -f "https://127.0.0.1:$cport/v3/kv/range" -d '{"key":"AA=="}' > /dev/null &&
    fail "etcd answers a client without a certificate"
  # roshmd.conf for two nodes
  for x in a b; do
    if [[ $x == a ]]; then tp=$ta mp=$ma; else tp=$tb mp=$mb; fi
    sed -E "s#/etc/roshm#$etc#g
            s#^node = \"[^\"]*\";#node = \"sd-$x\";#
            s#^eal = \[.*\];#eal = [ \"--no-huge\", \"-m\", \"128\", \"--no-pci\", \"--no-shconf\", \"--file-prefix\", \"$prefix-$x\", \"--log-level\", \"lib.eal:error\", \"--no-telemetry\" ];#
            s#endpoints = \"[^\"]*\"#endpoints = \"https://127.0.0.1:$cport\"#
            s#listen = \"0\.0\.0\.0\"; advertise = \"[^\"]*\";#listen = \"127.0.0.1\"; port = $tp; advertise = \"127.0.0.1\";#
            s#listen = \"0\.0\.0\.0:9472\"#listen = \"127.0.0.1:$mp\"#" "$d/doc/roshmd.conf" > "$d/$x.conf"
    printf 'socket = "%s";\nadmin: { token_file = "%s"; };\n' "$d/$x.sock" "$d/$x.admin" >> "$d/$x.conf"
    "$roshmd" --check-config "$d/$x.conf" > "$d/cc.$x" 2>&1 || fail "the doc's roshmd.conf: $(cat "$d/cc.$x")"
  done
  "$roshmd" -c "$d/a.conf" > "$d/roshmd-a.log" 2>&1 & pa=$!
  "$roshmd" -c "$d/b.conf" > "$d/roshmd-b.log" 2>&1 & pb=$!
  for mp in $ma $mb; do
    for _ in $(seq 150); do
      [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mp/readyz") == 200 ]] && break
      sleep 0.1
    done
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mp/readyz") == 200 ]] ||
      fail "a roshmd with the doc's configuration is not ready: $(tail -n 5 "$d/roshmd-a.log" "$d/roshmd-b.log")"
  done
  ROSHM_SOCK=$d/a.sock ROSHM_TOKEN=$tok "$owner" > "$d/owner.log" 2>&1 & opid=$!
  ROSHM_SOCK=$d/b.sock ROSHM_TOKEN=$tok "$writer" > "$d/writer.log" 2>&1 ||
    fail "demo-writer on node b: $(cat "$d/writer.log") $(tail -5 "$d/roshmd-b.log")"
  wait "$opid"; rc=$?; opid=
  [[ $rc == 0 ]] || fail "demo-owner on node a: exit $rc: $(cat "$d/owner.log")"
  grep -q 'opened default/board' "$d/writer.log" || fail "demo-writer: $(cat "$d/writer.log")"
  th_stop "$pa"; pa=; th_stop "$pb"; pb=; th_stop "$etcd_pid"; etcd_pid=
  n=$((n + 1))
fi
echo "check_systemd: $n passed, 0 failed"
