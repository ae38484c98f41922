# Sourced by the guest scripts: address eth0 as 198.18.1.N, add rxe0 on it,
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
