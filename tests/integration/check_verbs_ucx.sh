#!/usr/bin/env bash
# UCX (Debian's ucx-utils, unmodified) through libroshm-verbs: ucx_perftest's
# transport-level tests on UCX's rc_verbs and ud_verbs transports over
# roshm0, then its UCP tests (the layer MPI and most applications use: tag
# matching, rendezvous, RMA, streams) on rc_verbs with ud_verbs for wireup,
# between two roshmd nodes with the tcp transport (network namespaces as
# root, scripts/twonode.sh), server in node a, client in node b, each side
# exiting 0 with its "Final:" line. UCX lists an IB device only when
# /dev/infiniband/<its dev_name> is a character device it may open (it never
# opens it): for the test, /dev/infiniband/uverbs-roshm0 is a /dev/null
# (1:3) node, removed at the end; a pod mounts the node's /dev/null there
# (docs/verbs-compat.md, "UCX").
#   check_verbs_ucx.sh BUILD_ROOT VERBS_DIR [SANITIZE]
# In an ASan build our libraries are instrumented and UCX is not: the ASan
# runtime is preloaded into ucx_perftest (as check_verbs_perftest does).
set -u
unset LD_LIBRARY_PATH   # roshmd gets the system libibverbs; only UCX gets ours
build=$1 vdir=$2 sanitize=${3:-none}
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../lib/cleanup.sh"
# unmodified binaries around our instrumented libraries: the ASan runtime preloaded
th_asan_pre "check_verbs_ucx" "$sanitize"
pre=$TH_PRE
command -v ucx_perftest >/dev/null || { echo "check_verbs_ucx: skipped: ucx_perftest missing (Debian package ucx-utils)"; exit 77; }
[[ $(id -u) == 0 ]] && command -v ip >/dev/null || { echo "check_verbs_ucx: skipped: needs root and ip for network namespaces"; exit 77; }
th_uverbs_node || { echo "check_verbs_ucx: skipped: cannot make /dev/infiniband/uverbs-roshm0"; exit 77; }
d=$(th_tmpdir vucx)
TN_PREFIX=$(th_prefix vu)
. "$src/scripts/twonode.sh"
TN_DATAPLANE='idle_yield = true;'
srv=
trap 'th_stop "$srv"; twonode_down >/dev/null 2>&1; th_eal_rm "$TN_PREFIX-a"; th_eal_rm "$TN_PREFIX-b"; th_rmdir "$d";
      th_uverbs_rm' EXIT
fail() { echo "FAIL: $*"; tail -n 20 "$d"/node-*.log; exit 1; }
twonode_up "$build" "$d" 200 || fail "roshmd nodes did not start"
# ROSHM_VERBS_YIELD=1: UCX polls without a pause, and on this 2-CPU machine
# two such processes kept the pollers (idle_yield) off their CPU: every
# round trip took 2 ms (a scheduler tick) instead of about 50 us
va="env $pre ROSHM_VERBS_YIELD=1 LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_A"
vb="env $pre ROSHM_VERBS_YIELD=1 ROSHM_VERBS_DEBUG=1 LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_B"

$va ucx_info -d >"$d/ucx_info" 2>&1 || { cat "$d/ucx_info"; fail "ucx_info -d"; }
for tl in rc_verbs ud_verbs; do
  grep -A3 "Transport: $tl" "$d/ucx_info" | grep -q 'Device: roshm0:1' ||
    { cat "$d/ucx_info"; fail "UCX lists no $tl transport on roshm0:1"; }
done
echo "ok: ucx_info -d lists rc_verbs and ud_verbs on roshm0:1"

port=13337
# UCX_IB_ALLOC: no SysV huge pages for UCX's own buffers (registering them
# puts our pages in their place, and UCX warns at exit that it cannot
# detach the segment; docs/verbs-compat.md, "UCX")
va="$va UCX_IB_ALLOC=thp,mmap,heap" vb="$vb UCX_IB_ALLOC=thp,mmap,heap"
ucx_pair() {   # ucx_perftest arguments of one test (UCT: -x TRANSPORT -d roshm0:1)
  port=$((port + 1))
  bg_a $va UCX_NET_DEVICES=roshm0:1 UCX_TLS=rc_verbs,ud_verbs ucx_perftest -p $port >"$d/ucx.server" 2>&1
  srv=$BG_PID
  sleep 1
  if ! in_b timeout 60 $vb UCX_NET_DEVICES=roshm0:1 UCX_TLS=rc_verbs,ud_verbs ucx_perftest "$ADDR_A" \
       -p $port "$@" >"$d/ucx.client" 2>&1 </dev/null; then
    cat "$d/ucx.client" "$d/ucx.server"; fail "ucx_perftest $* client failed"
  fi
  wait "$srv"; local rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/ucx.server"; fail "ucx_perftest $* server exited $rc"; }
  grep -E '^Final: +[0-9]+ ' "$d/ucx.client" || { cat "$d/ucx.client"; fail "ucx_perftest $* printed no result"; }
  ! grep -E 'UCX +(ERROR|WARN)' "$d/ucx.client" "$d/ucx.server" || fail "ucx_perftest $*: UCX complained"
  echo "ok: ucx_perftest $*"
}
rc="-x rc_verbs -d roshm0:1"
ucx_pair $rc -t am_lat -n 1000                  # SENDs (inline) into an SRQ
ucx_pair $rc -t am_bw -s 64 -n 5000              # message rate
ucx_pair $rc -t put_lat -n 1000                  # RDMA WRITE ping-pong on memory
ucx_pair $rc -t put_bw -s 65536 -D zcopy -n 500  # RDMA WRITE from registered memory
ucx_pair $rc -t get -s 65536 -D zcopy -n 500     # RDMA READ
ucx_pair $rc -t add_lat -n 1000                  # FETCH_ADD without result
ucx_pair $rc -t fadd -n 1000                     # FETCH_ADD
ucx_pair $rc -t cswap -n 1000                    # CMP_AND_SWP
ucx_pair -x ud_verbs -d roshm0:1 -t am_lat -n 1000   # UD QPs (UCX's own reliability on top)
ucx_pair -x ud_verbs -d roshm0:1 -t am_bw -s 64 -n 5000
# UCP: wireup over ud_verbs, then rc_verbs
ucx_pair -t tag_lat -n 1000                      # tag matching, eager
ucx_pair -t tag_bw -s 64 -n 5000
ucx_pair -t tag_bw -s 65536 -n 200               # rendezvous (RDMA READ of the sender's buffer)
ucx_pair -t ucp_put_lat -n 1000                  # RMA
ucx_pair -t ucp_get -s 65536 -n 200
ucx_pair -t stream_lat -n 1000
echo "check_verbs_ucx: ok"
