#!/bin/bash
# In a Soft-RoCE VM: address eth0, add rxe0 on it, run ib_read_lat as server
# (node 1) or client (node 2).
n=$1
ip link set lo up
ip addr add 198.18.1.$n/24 dev eth0
ip link set eth0 up
rdma link add rxe0 type rxe netdev eth0 || { echo "guest: rdma link add failed"; exit 1; }
rdma link show
if [ "$n" = 1 ]; then
  timeout 90 ib_read_lat -d rxe0 -s 64 -n 200 -F; echo "guest: server exit $?"
else
  sleep 2
  timeout 90 ib_read_lat -d rxe0 -s 64 -n 200 -F 198.18.1.1
fi
