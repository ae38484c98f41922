#!/bin/bash
# In a Soft-RoCE VM: address eth0, add rxe0 on it, run ib_read_lat as server
# (node 1) or client (node 2).
n=$1
. "$(dirname "$0")/guest_common.sh"
guest_net "$n"
rdma link show
if [ "$n" = 1 ]; then
  timeout 90 ib_read_lat -d rxe0 -s 64 -n 200 -F; echo "guest: server exit $?"
else
  sleep 2
  timeout 90 ib_read_lat -d rxe0 -s 64 -n 200 -F 198.18.1.1
fi
