#!/bin/bash
# Issue 14 on real RoCE v2: unmodified Debian perftest through libroshm-verbs
# between two Soft-RoCE VMs. Each VM runs roshmd with the verbs transport on
# its rxe0 (file registry on the shared directory); the applications see only
# roshm0 (LD_LIBRARY_PATH), roshmd uses the system libibverbs and rxe0. VM1
# runs each test's server, VM2 its client (perftest's own TCP exchange over
# the VMs' link), then libfabric's fi_pingpong, qperf, rstream and riostream
# (rsockets), rsock_dgram (datagram rsockets); then verbs_check proves the
# bytes and atomics, verbs_ud the same for UD QPs, verbs_mcast for UD
# multicast, verbs_mw for memory windows and verbs_xrc for XRC; MPICH runs a
# rank in each VM (mpi_rma). NetPIPE and Open MPI ran here too, and took 200 s
# of this test's 590 under TCG: check_verbs_mpi runs both (and MPICH's
# NetPIPE) through the same library over the tcp transport in every run.
# The two VMs step through the tests with marker files in /run/shared.
n=$1
. "$(dirname "$0")/guest_common.sh"
V=$B/client-lib/verbs
guest_net "$n"
# The poller sleeps through every transfer of 64 KiB or more in the NIC
# (inflight_sleep_bytes): ib_write_bw / ib_read_bw -s 65536 and qperf's
# rc_bw and rc_rdma_read_bw complete only if each completion event wakes it.
# limits.max_grants: verbs_check many_qps connects max_grants / 2 + 1 peer
# processes to one MR (the last is refused). 64 here (33 contexts, each
# with its 16 MiB arena, in a VM of 1 GiB); check_verbs_perftest runs 80.
# quota.grant_mrs: VM1 gives each grant to VM2 an MR of its own (verbs_mw's
# unbound window is refused at its NIC at once, below); VM2 gives none
# (0), so that every grant of VM2's to VM1 goes through the region's key,
# as past that quota.
gmrs=; [ "$n" = 2 ] && gmrs='quota: { grant_mrs = 0; };'
guest_conf "$n" 'registry: { dir = "/run/shared/registry"; revalidate_ms = 500; };
dataplane: { inflight_sleep_bytes = 65536; };
limits: { max_grants = 64; };
'"$gmrs"'
transport: { verbs: { enabled = true; device = "rxe0"; secret_file = "/run/shared/secret"; }; };'
guest_roshmd "$n"
app() { env LD_LIBRARY_PATH="$V" ROSHM_SOCK=/run/roshm/roshmd.sock VERBS_CHECK_MAX_GRANTS=64 "$@"; }
i=0
# -F: a report even when perftest's clock calibration fails ("Correlation
# coefficient r^2 < 0.9", then exit 1 without one), as it does under TCG on
# a loaded host; the figures are not what this test checks
pair() {
  i=$((i + 1))
  perf_pair $i roshm0 "$1" -F "${@:2}"
  if [ -n "$PAIR_OK" ]; then
    grep -E 'Link type|GID index' "/run/shared/cli.$i" | head -2 | sed 's/^/guest: /'
    say "ok: $* over roshm0: $(grep -E '^ +[0-9]+ +[0-9]+ ' "/run/shared/cli.$i" | head -1 | tr -s ' ')"
  fi
}

# Every perftest issue 14 names, between the VMs. (ib_write_lat -s 4096,
# ib_atomic_lat -A CMP_AND_SWAP, ib_send_bw -c XRC, fi_pingpong -e rdm and
# the 64-byte rstream and riostream runs passed here too and went for CI's
# time: check_verbs_perftest, check_rdmacm and check_rsockets run them over
# tcp, and verbs_check below checks every atomic's result between the VMs)
pair ib_write_lat -n 50
pair ib_read_lat -n 50
pair ib_atomic_lat -n 50
pair ib_atomic_bw -n 50
pair ib_write_bw -n 50 -s 65536
pair ib_read_bw -n 50 -s 65536
pair ib_send_lat -n 50
pair ib_send_bw -n 50 -s 65536
pair ib_send_lat -n 50 -c UD
# XRC: VM2's XRC_SEND QPs to VM1's XRC_RECV QPs and its XRC SRQ
pair ib_send_lat -n 50 -c XRC
pair ib_read_lat -n 50 -c XRC
# -R: the QPs connected by our librdmacm (RC; UD over RDMA_PS_UDP, whose
# address, QPN and Q_Key come from the CM's rdma_ud_param)
pair ib_write_lat -n 50 -R
pair ib_send_lat -n 50 -c UD -R

# libfabric's verbs provider (Debian's fi_pingpong, unmodified): FI_EP_MSG
# (RC through our librdmacm), FI_EP_RDM (ofi_rxm over those) and
# FI_EP_DGRAM (UD); -c checks every message's bytes. VM1 serves on control
# port 18700+i, VM2's client prints the line checked: SIZE 50 =50
fi_pair() {
  local size=$1 port
  shift
  i=$((i + 1))
  port=$((18700 + i))
  if [ "$n" = 1 ]; then
    app timeout 240 fi_pingpong -p verbs -B $port -S $size -I 50 -c "$@" > "/run/shared/fi.srv.$i" 2>&1 &
    s=$!
    wait_listen $port $s
    touch "/run/shared/go.$i"
    wait $s || { say "FAIL: fi_pingpong $* server"; cat "/run/shared/fi.srv.$i"; }
    for _ in $(seq 1200); do [ -e "/run/shared/done.$i" ] && break; sleep 0.2; done
  else
    for _ in $(seq 1200); do [ -e "/run/shared/go.$i" ] && break; sleep 0.2; done
    if app timeout 240 fi_pingpong -p verbs -P $port -S $size -I 50 -c "$@" 198.18.1.1 \
         > "/run/shared/fi.cli.$i" 2>&1 && grep -qE "^[0-9.]+k? +50 +=50 " "/run/shared/fi.cli.$i"; then
      say "ok: fi_pingpong $* over roshm0: $(grep -E '^[0-9.]+k? +50 +=50 ' "/run/shared/fi.cli.$i" | tr -s ' ')"
    else
      say "FAIL: fi_pingpong $* over roshm0"; cat "/run/shared/fi.cli.$i"
    fi
    touch "/run/shared/done.$i"
  fi
}
fi_pair 4096 -e msg
fi_pair 1024 -e dgram

# qperf (its own TCP exchange, QPs moved by ibv_modify_qp): VM1 serves,
# VM2 runs each RC test for 2 s; a result that is not 0 went over roshm0.
# -to 30: qperf's exchanges time out after 5 s by default, and under TCG a
# test's set-up behind the last one's work still draining over rxe can take
# longer. Every qperf test issue 14 names: WRITE and SEND latency, a READ
# stream, a SEND stream, both atomics.
i=$((i + 1))
qtests="rc_rdma_write_lat rc_rdma_read_bw rc_lat rc_bw rc_compare_swap_mr rc_fetch_add_mr"
if [ "$n" = 1 ]; then
  app timeout 300 qperf -lp 19765 > /run/shared/qperf.server 2>&1 &
  s=$!
  wait_listen 19765 $s
  touch "/run/shared/go.$i"
  for _ in $(seq 1500); do [ -e "/run/shared/done.$i" ] && break; sleep 0.2; done
  kill $s 2>/dev/null; wait $s 2>/dev/null
else
  for _ in $(seq 1200); do [ -e "/run/shared/go.$i" ] && break; sleep 0.2; done
  for t in $qtests; do
    if app timeout 90 qperf -lp 19765 198.18.1.1 -to 30 -t 2 $t > "/run/shared/qperf.$t" 2>&1 &&
       grep -Eq '(latency|bw|msg_rate) += +[0-9.,]*[1-9][0-9.,]* ' "/run/shared/qperf.$t"; then
      say "ok: qperf $t over roshm0: $(grep -E '(latency|bw|msg_rate) +=' "/run/shared/qperf.$t" | tr -s ' ')"
    else
      say "FAIL: qperf $t over roshm0"; cat "/run/shared/qperf.$t"
    fi
  done
  touch "/run/shared/done.$i"
fi

# rsockets (our librdmacm's rsocket.c): Debian's rstream, unmodified, with
# its data check (-T v): 64 B ping-pongs, then 1 MB transfers each way.
# VM1 serves on port 18800+i, VM2's client prints the result line.
rs_pair() {   # PROG (rstream or riostream) ARGS...
  local port prog=$1
  shift
  i=$((i + 1))
  port=$((18800 + i))
  if [ "$n" = 1 ]; then
    app timeout 240 $prog -p $port -T v "$@" > "/run/shared/rs.srv.$i" 2>&1 &
    s=$!
    wait_listen $port $s
    touch "/run/shared/go.$i"
    wait $s || { say "FAIL: $prog $* server"; cat "/run/shared/rs.srv.$i"; }
    for _ in $(seq 1200); do [ -e "/run/shared/done.$i" ] && break; sleep 0.2; done
  else
    for _ in $(seq 1200); do [ -e "/run/shared/go.$i" ] && break; sleep 0.2; done
    if app timeout 240 $prog -s 198.18.1.1 -p $port -T v "$@" > "/run/shared/rs.cli.$i" 2>&1 &&
       grep -qE '^custom +[0-9.]+[kmg]? +[0-9]+ +[0-9]+ ' "/run/shared/rs.cli.$i"; then
      say "ok: $prog -T v $* over roshm0: $(grep -E '^custom ' "/run/shared/rs.cli.$i" | tr -s ' ')"
    else
      say "FAIL: $prog -T v $* over roshm0"; cat "/run/shared/rs.cli.$i"
    fi
    touch "/run/shared/done.$i"
  fi
}
# XRC through our librdmacm: rdmacm-utils' rdma_xserver -c x (an XRC_RECV
# listener of rdma_create_ep, rdma_create_srq's XRC SRQ, its number in the
# REP's private data) and rdma_xclient -c x (an XRC_SEND QP whose SEND
# names it); the server ends 0 only once its RECV completed
x_pair() {
  local port
  i=$((i + 1))
  port=$((18800 + i))
  if [ "$n" = 1 ]; then
    app timeout 240 rdma_xserver -p $port -c x > "/run/shared/x.srv.$i" 2>&1 &
    s=$!
    wait_listen $port $s
    touch "/run/shared/go.$i"
    if wait $s && grep -q 'rdma_xserver: end 0' "/run/shared/x.srv.$i"; then
      say "ok: rdma_xserver -c x over roshm0"
    else
      say "FAIL: rdma_xserver -c x over roshm0"; cat "/run/shared/x.srv.$i"
    fi
    for _ in $(seq 1200); do [ -e "/run/shared/done.$i" ] && break; sleep 0.2; done
  else
    for _ in $(seq 1200); do [ -e "/run/shared/go.$i" ] && break; sleep 0.2; done
    if app timeout 240 rdma_xclient -s 198.18.1.1 -p $port -c x > "/run/shared/x.cli.$i" 2>&1 &&
       grep -q 'rdma_xclient: end 0' "/run/shared/x.cli.$i"; then
      say "ok: rdma_xclient -c x over roshm0"
    else
      say "FAIL: rdma_xclient -c x over roshm0"; cat "/run/shared/x.cli.$i"
    fi
    touch "/run/shared/done.$i"
  fi
}
x_pair
rs_pair rstream -S 1000000 -C 4
# riostream: riowrite into the peer's riomap'd buffer, which it watches
# without a call of ours (its last byte), then checks
rs_pair riostream -S 1000000 -I 2 -C 2
# datagram rsockets (rsocket_dgram.c): rsock_dgram's echo of 100 datagrams
# of 1 to 4000 bytes, each checked (its server is bound once ss lists it:
# what comes before its QP waits in the UDP socket)
i=$((i + 1))
port=$((18800 + i))
if [ "$n" = 1 ]; then
  app timeout 240 "$B/tests/rsock_dgram" server 198.18.1.1 $port > /run/shared/dg.srv 2>&1 &
  s=$!
  for _ in $(seq 600); do
    ss -Hlun "sport = :$port" 2>/dev/null | grep -q . && break
    sleep 0.1
  done
  touch "/run/shared/go.$i"
  wait $s || { say "FAIL: rsock_dgram server"; cat /run/shared/dg.srv; }
  for _ in $(seq 1200); do [ -e "/run/shared/done.$i" ] && break; sleep 0.2; done
else
  for _ in $(seq 1200); do [ -e "/run/shared/go.$i" ] && break; sleep 0.2; done
  if app timeout 240 "$B/tests/rsock_dgram" client 198.18.1.1 $port 100 > /run/shared/dg.cli 2>&1; then
    say "ok: rsock_dgram 100 datagrams over roshm0: $(grep '^client:' /run/shared/dg.cli)"
  else
    say "FAIL: rsock_dgram over roshm0"; cat /run/shared/dg.cli
  fi
  touch "/run/shared/done.$i"
fi

# MPI between the VMs: Debian's MPICH (ch4:ucx; UCX's rc_verbs on roshm0),
# one rank in each VM. Hydra's manual launcher prints each host's proxy
# command (HYDRA_LAUNCH); VM1 runs mpiexec and proxy 0, VM2 proxy 1, which
# connects back to mpiexec over the link. /dev/infiniband/uverbs-roshm0:
# UCX lists a device only with its node there (tests/lib/cleanup.sh
# th_uverbs_node); /dev/shm: UCX opens its shared-memory components even
# when UCX_TLS leaves them out, and says ERROR without it.
[ -e /dev/infiniband/uverbs-roshm0 ] || mknod /dev/infiniband/uverbs-roshm0 c 1 3
[ -d /dev/shm ] || { mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm; }
rank="env LD_LIBRARY_PATH=$V ROSHM_SOCK=/run/roshm/roshmd.sock UCX_TLS=rc_verbs,ud_verbs,self
 UCX_NET_DEVICES=roshm0:1 UCX_IB_ALLOC=thp,mmap,heap MPIR_CVAR_NOLOCAL=1"
# mpich NAME CMD...: the two ranks of CMD, output (rank 0's) in
# /run/shared/NAME.out on VM1; MPICH_RC its exit status there
mpich() {
  local name=$1 m
  shift
  i=$((i + 1))
  if [ "$n" = 1 ]; then
    timeout 400 mpiexec.mpich -launcher manual -iface eth0 -hosts 198.18.1.1,198.18.1.2 -n 2 \
      -ppn 1 $rank "$@" > "/run/shared/$name.out" 2>&1 &
    m=$!
    for _ in $(seq 300); do grep -q '^HYDRA_LAUNCH_END' "/run/shared/$name.out" && break; sleep 0.1; done
    sed -n 's/^HYDRA_LAUNCH: //p' "/run/shared/$name.out" > "/run/shared/$name.proxies"
    touch "/run/shared/go.$i"
    timeout 400 $(sed -n 1p "/run/shared/$name.proxies") > "/run/shared/$name.proxy0" 2>&1
    wait $m; MPICH_RC=$?
    grep -qE 'UCX +(ERROR|WARN)' "/run/shared/$name.out" && MPICH_RC=99
    [ $MPICH_RC = 0 ] ||
      cat "/run/shared/$name.out" "/run/shared/$name.proxy0" "/run/shared/$name.proxy1" 2>/dev/null
    for _ in $(seq 600); do [ -e "/run/shared/done.$i" ] && break; sleep 0.2; done
  else
    for _ in $(seq 1200); do [ -e "/run/shared/go.$i" ] && break; sleep 0.2; done
    timeout 400 $(sed -n 2p "/run/shared/$name.proxies") > "/run/shared/$name.proxy1" 2>&1 ||
      say "mpich $name: proxy 1 exit $?"
    touch "/run/shared/done.$i"
  fi
}
# tests/integration/mpi_rma.c: Sendrecv to 4 MiB, Put / Get, Accumulate,
# Fetch_and_op from both ranks, Compare_and_swap, each value checked
mpich mpich-rma "$B/tests/mpi_rma"
if [ "$n" = 1 ]; then
  if [ $MPICH_RC = 0 ] && grep -q '^mpi_rma: ok' /run/shared/mpich-rma.out; then
    say "ok: MPICH mpi_rma between the VMs over roshm0: $(grep -c '^mpi_rma: ' /run/shared/mpich-rma.out) checks"
  else
    say "FAIL: MPICH mpi_rma between the VMs (exit $MPICH_RC)"
  fi
fi

# ours NAME PORT [CMD]: tests/NAME's server in VM1, its client in VM2 (CMD
# after it there), in step with the marker files
ours() {
  i=$((i + 1))
  if [ "$n" = 1 ]; then
    app timeout 240 "$B/tests/$1" server 198.18.1.1 "$2" > "/run/shared/$1.server" 2>&1 &
    s=$!
    wait_listen "$2" $s
    touch "/run/shared/go.$i"
    wait $s && say "$1 server ok" || { say "FAIL: $1 server"; cat "/run/shared/$1.server"; }
    for _ in $(seq 600); do [ -e "/run/shared/done.$i" ] && break; sleep 0.2; done
  else
    for _ in $(seq 1200); do [ -e "/run/shared/go.$i" ] && break; sleep 0.2; done
    app timeout 240 "$B/tests/$1" client 198.18.1.1 "$2" > "/run/shared/$1.client" 2>&1 &&
      say "$1 client ok" || { say "FAIL: $1 client"; cat "/run/shared/$1.client"; }
    [ -z "${3:-}" ] || $3
    touch "/run/shared/done.$i"
  fi
}
# verbs_check: the bytes a WRITE sent are the ones in the owner's buffer;
# the rkeys went over RoCE: VM2's roshmd has a verbs peer vm1
ours verbs_check 7599 "$B/client-lib/tools/roshmctl -s /run/roshm/roshmd.sock peers"
# verbs_ud: UD QPs (claims, publications and the hostile pod's CASes are the
# NIC's atomics on the ring's state words here)
ours verbs_ud 7598
# verbs_mcast: UD multicast (members in both VMs; no other tenant here)
ours verbs_mcast 7596
# verbs_mw: memory windows (binds, WRs through them, invalidations). An
# unbound window's grant had its own MR at VM1's NIC, deregistered by the
# unbind: VM2's next WR through it is refused there (before: up to 500 ms
# of WRs passed, until VM2 read the record)
mw_at_once() {
  if grep -q "WRITE through the unbound type 1 window: refused (0 passed before)" \
       /run/shared/verbs_mw.client; then
    say "ok: verbs_mw: the unbound window refused at the owner's NIC at once"
  else
    say "FAIL: verbs_mw: WRs passed through the unbound window"
    grep "passed before" /run/shared/verbs_mw.client
  fi
}
ours verbs_mw 7595 mw_at_once
# verbs_xrc: XRC domains, SRQs and QPs (bytes, one-sided WRs on the SRQs'
# PD, a PD none of them is on, another domain's SRQ)
ours verbs_xrc 7593
if [ "$n" = 2 ]; then
  # VM2's grants (each pair's client MRs and QP rings) went through the
  # region's key, and every test above passed with them
  grep -q "grant goes through the region's key" /run/shared/roshmd-2.log &&
    say "ok: grants past quota.grant_mrs through the region's key" ||
    say "FAIL: no grant passed quota.grant_mrs"
fi
# Every application has exited: no grant MR is left at the NIC (VM1 had
# them, VM2 made its grants without: roshmctl status, grants_without_mr)
gm=x
for _ in $(seq 100); do
  st=$("$B/client-lib/tools/roshmctl" -s /run/roshm/roshmd.sock --json status 2>&1)
  gm=$(echo "$st" | grep -o '"grant_mrs": *[0-9]*' | grep -o '[0-9]*$')
  [ "$gm" = 0 ] && break
  sleep 0.1
done
gn=$(echo "$st" | grep -o '"grants_without_mr": *[0-9]*' | grep -o '[0-9]*$')
ok=
if [ "$gm" = 0 ] && [ -n "$gn" ]; then
  if [ "$n" = 1 ]; then [ "$gn" = 0 ] && ok=1; else [ "$gn" -gt 0 ] && ok=1; fi
fi
if [ -n "$ok" ]; then
  say "ok: vm$n: no grant MR left, $gn grants made without one"
else
  say "FAIL: vm$n: grant MRs left: $gm, grants without one: $gn: $st"
fi
kill -TERM $RD; wait $RD
say "roshmd exit $?"
