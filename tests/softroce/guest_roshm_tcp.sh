#!/bin/bash
# In a test VM: roshmd with the tcp transport over the VMs' link and a file
# registry on the shared directory; node 1 runs the demo owner pod, node 2
# the demo writer pod against it.
n=$1
B=$(cat /run/shared/build)
. "$(dirname "$0")/guest_common.sh"
guest_net "$n"
mkdir -p /run/roshm
cat > /run/roshm/roshmd.conf <<CONF
node = "vm$n";
socket = "/run/roshm/roshmd.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--no-shconf", "--file-prefix", "vm$n",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
registry: { dir = "/run/shared/registry"; revalidate_ms = 500; };
transport: { tcp: { enabled = true; listen = "198.18.1.$n"; port = 7471;
                    secret_file = "/run/shared/secret"; }; };
CONF
"$B/dataplane/roshmd" -c /run/roshm/roshmd.conf > /run/shared/roshmd-$n.log 2>&1 &
for _ in $(seq 100); do [ -S /run/roshm/roshmd.sock ] && break; sleep 0.2; done
export ROSHM_SOCK=/run/roshm/roshmd.sock
if [ "$n" = 1 ]; then
  timeout 120 "$B/client-lib/examples/demo-owner"; echo "guest: owner exit $?"
else
  sleep 3
  timeout 120 "$B/client-lib/examples/demo-writer"; echo "guest: writer exit $?"
fi
kill -TERM %1; wait
echo "guest: roshmd exit $?"
