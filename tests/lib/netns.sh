#!/usr/bin/env bash
# Test hosts: N network namespaces joined through a bridge that lives in a
# hub namespace (nothing is added to the caller's namespace).
#   netns.sh up PREFIX N [v6]  PREFIX-hub: br0 198.18.0.254/24
#                              PREFIX-i:   eth0 198.18.0.i/24, lo up
#                              with v6 also fd00:198:18::fe/64 on br0 and
#                              fd00:198:18::i/64 on each eth0 (no DAD wait)
#   netns.sh down PREFIX N
set -eu
cmd=$1 prefix=$2 n=$3 v6=${4:-}
hub=$prefix-hub
case $cmd in
up)
  ip netns add "$hub"
  ip -n "$hub" link set lo up
  ip -n "$hub" link add br0 type bridge
  ip -n "$hub" addr add 198.18.0.254/24 dev br0
  if [[ $v6 == v6 ]]; then ip -n "$hub" addr add fd00:198:18::fe/64 dev br0 nodad; fi
  ip -n "$hub" link set br0 up
  for i in $(seq 1 "$n"); do
    ns=$prefix-$i
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add eth0 type veth peer name v$i netns "$hub"
    ip -n "$ns" addr add 198.18.0.$i/24 dev eth0
    if [[ $v6 == v6 ]]; then ip -n "$ns" addr add "fd00:198:18::$(printf %x "$i")/64" dev eth0 nodad; fi
    ip -n "$ns" link set eth0 up
    ip -n "$hub" link set v$i master br0
    ip -n "$hub" link set v$i up
  done
  ;;
down)
  for i in $(seq 1 "$n"); do ip netns del "$prefix-$i" 2>/dev/null || true; done
  ip netns del "$hub" 2>/dev/null || true
  ;;
esac
