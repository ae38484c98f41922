# Sourced by the guest scripts. B: the build directory; SR: the pods of
# sr_client.c; say: a line of the guest's console.
B=$(cat /run/shared/build)
SR=$B/tests/sr_client
say() { echo "guest: $*"; }

# guest_net N: address eth0 as 198.18.1.N, add rxe0 on it,
# and wait until the other VM answers on the link (it boots at its own pace;
# a link that never comes up is reported as such, not as an RDMA failure).
guest_net() {
  local n=$1 other=$((3 - $1))
  ip link set lo up
  ip addr add 198.18.1.$n/24 dev eth0
  ip link set eth0 up
  rdma link add rxe0 type rxe netdev eth0 || { echo "guest: rdma link add failed"; exit 1; }
  for i in $(seq 60); do
    if busybox ping -c 1 -W 1 198.18.1.$other >/dev/null 2>&1; then
      echo "guest: link to 198.18.1.$other up after ${i} tries"
      return 0
    fi
  done
  echo "guest: no answer from 198.18.1.$other on eth0 for 60 s"
  ip -s link show eth0
  exit 1
}

# roshmd's config in a guest: node vmN, its socket, EAL without hugepages or
# PCI; the rest (registry, transport, ...) is the caller's $2.
guest_conf() {
  mkdir -p /run/roshm
  cat > /run/roshm/roshmd.conf <<CONF
node = "vm$1";
socket = "/run/roshm/roshmd.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--no-shconf", "--file-prefix", "vm$1",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
admin: { token_file = "/run/roshm-admin/admin.token"; };
$2
CONF
  # roshmctl here is the node's admin
  export ROSHM_ADMIN_TOKEN_FILE=/run/roshm-admin/admin.token
}

# Start roshmd (its pid in RD, its log appended to the shared directory)
# and wait for its socket.
guest_roshmd() {
  "$B/dataplane/roshmd" -c /run/roshm/roshmd.conf >> "/run/shared/roshmd-$1.log" 2>&1 &
  RD=$!
  for _ in $(seq 100); do [ -S /run/roshm/roshmd.sock ] && break; sleep 0.2; done
  export ROSHM_SOCK=/run/roshm/roshmd.sock
}

# One perftest pair, step by step with VM1 as server and VM2 as client
# (marker files go.N / done.N in /run/shared). DEV roshm0 runs the tool
# through libroshm-verbs (LD_LIBRARY_PATH, roshmd's socket), rxe0 natively.
# VM2 leaves the client's output in /run/shared/cli.N and sets PAIR_OK.
#   perf_pair N DEV TOOL ARGS...     ($n: this VM, $B: the build dir)
# Wait until the server @2 (a pid) listens on TCP port @1, up to 60 s: a
# fixed second was not always enough under TCG on a loaded host (libraries,
# the device, roshmd's attach), and perftest's client does not retry its
# connect. Fails when the server is gone.
wait_listen() {
  local port=$1 pid=$2
  for _ in $(seq 600); do
    ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

perf_pair() {
  local i=$1 dev=$2 name=$3 rc s
  shift 3
  local run=(timeout 240)
  # ROSHM0_WRAP (an array): what else runs the tool on roshm0 (the bench:
  # on the poller's CPU, yielding to it)
  [ "$dev" = roshm0 ] && run=(env LD_LIBRARY_PATH="$B/client-lib/verbs" ROSHM_SOCK=/run/roshm/roshmd.sock
                              "${ROSHM0_WRAP[@]}" timeout 240)
  PAIR_OK=
  if [ "$n" = 1 ]; then
    "${run[@]}" "$name" -d "$dev" -p $((18600 + i)) "$@" > "/run/shared/srv.$i" 2>&1 &
    s=$!
    wait_listen $((18600 + i)) $s
    touch "/run/shared/go.$i"
    wait $s; rc=$?
    [ $rc = 0 ] || { echo "guest: server $name -d $dev $* exit $rc"; cat "/run/shared/srv.$i"; }
    for _ in $(seq 1200); do [ -e "/run/shared/done.$i" ] && break; sleep 0.2; done
  else
    for _ in $(seq 1200); do [ -e "/run/shared/go.$i" ] && break; sleep 0.2; done
    "${run[@]}" "$name" -d "$dev" -p $((18600 + i)) "$@" 198.18.1.1 > "/run/shared/cli.$i" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -qE '^ +[0-9]+ +[0-9]+ ' "/run/shared/cli.$i"; then
      PAIR_OK=1
    else
      echo "guest: FAIL: $name -d $dev $* exit $rc"; cat "/run/shared/cli.$i"
    fi
    touch "/run/shared/done.$i"
  fi
}
