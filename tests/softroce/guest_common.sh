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
