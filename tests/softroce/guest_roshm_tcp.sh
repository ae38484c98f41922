#!/bin/bash
# In a test VM: roshmd with the tcp transport over the VMs' link and a file
# registry on the shared directory; node 1 runs the demo owner pod, node 2
# the demo writer pod against it.
n=$1
B=$(cat /run/shared/build)
. "$(dirname "$0")/guest_common.sh"
guest_net "$n"
guest_conf "$n" 'registry: { dir = "/run/shared/registry"; revalidate_ms = 500; };
transport: { tcp: { enabled = true; listen = "198.18.1.'"$n"'"; port = 7471;
                    secret_file = "/run/shared/secret"; }; };'
guest_roshmd "$n"
if [ "$n" = 1 ]; then
  timeout 120 "$B/client-lib/examples/demo-owner"; echo "guest: owner exit $?"
else
  sleep 3
  timeout 120 "$B/client-lib/examples/demo-writer"; echo "guest: writer exit $?"
fi
kill -TERM $RD; wait $RD
echo "guest: roshmd exit $?"
