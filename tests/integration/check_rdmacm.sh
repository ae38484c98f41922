#!/usr/bin/env bash
# librdmacm of libroshm-verbs (client-lib/verbs/rdmacm.c) between two roshmd
# nodes with the tcp transport in network namespaces (198.18.0.1 / .2, set
# up as check_verbs_perftest.sh does); applications get our librdmacm.so.1
# and libibverbs.so.1 through LD_LIBRARY_PATH and nothing else.
#   check_rdmacm.sh BUILD_ROOT VERBS_DIR RDMACM_CHECK cm|send [SANITIZE]
# cm:   rdmacm_check server/client (the API across the nodes, RDMA through
#       the QPs it connects; once more as two pods of node a in two network
#       namespaces), gid-v/gid-p (a peer on node b that gives node a's own
#       GID with its QPNs is refused) and local (hostile peers on both ends of the CM
#       socket, IPv6 and dual stack, migrate, rdma_establish, timeouts,
#       RDMA_PS_UDP's SIDR answers and datagrams, XRC);
#       Debian's ucmatose -C 0 (connections without messages: several, then
#       migrated) after garbage was thrown at its port; cmtime -c 20 (20
#       connections set up and torn down step by step); qperf -cm1's RDMA
#       WRITE, READ and atomic tests.
# send: what also needs SEND/RECV and completion channels from roshm0:
#       ib_write_lat / ib_read_lat / ib_atomic_lat / ib_send_lat -R (perftest
#       -R exchanges its keys with SENDs), ucmatose with messages,
#       rdma_server + rdma_client, rdma_xserver + rdma_xclient (XRC and RC), rping, qperf -cm1 rc_lat / rc_bw; UD over
#       RDMA_PS_UDP: ib_send_lat / ib_send_bw -R -c UD, udaddy, mckey
#       (multicast: receivers on both nodes); libfabric's
#       verbs provider: fi_pingpong -e msg / rdm / dgram -c. Skipped (77)
#       while `rdmacm_check probe` finds no RECV or no completion events.
set -u
# meson puts our libraries on LD_LIBRARY_PATH (linked targets): roshmd
# itself must get the system ones; only the applications get ours.
unset LD_LIBRARY_PATH
build=$1 vdir=$2 check=$3 mode=$4 sanitize=${5:-none}
name=check_rdmacm
[[ $mode == send ]] && name=check_rdmacm_send
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../lib/cleanup.sh"
# unmodified binaries around our instrumented libraries: the ASan runtime preloaded
th_asan_pre "$name" "$sanitize"
pre=$TH_PRE
if [[ $mode == cm ]]; then need=(ucmatose cmtime qperf)
else need=(ib_write_lat ib_read_lat ib_atomic_lat ib_send_lat ib_send_bw ucmatose rdma_server rdma_client rdma_xserver rdma_xclient rping udaddy mckey qperf fi_pingpong); fi
for t in "${need[@]}"; do
  command -v "$t" >/dev/null || { echo "$name: skipped: $t missing (Debian packages rdmacm-utils, perftest, qperf)"; exit 77; }
done
[[ $(id -u) == 0 ]] && command -v ip >/dev/null || { echo "$name: skipped: needs root and ip for network namespaces"; exit 77; }
d=$(th_tmpdir rdmacm)
TN_PREFIX=$(th_prefix cm)
. "$src/scripts/twonode.sh"
srv=
mra= mrb= gp=
trap 'th_stop "$srv"; th_stop "$mra"; th_stop "$mrb"; th_stop "$gp"; twonode_down >/dev/null 2>&1; th_eal_rm "$TN_PREFIX-a"; th_eal_rm "$TN_PREFIX-b"; th_rmdir "$d"' EXIT
fail() { echo "FAIL: $*"; tail -n 20 "$d"/node-*.log; exit 1; }
twonode_up "$build" "$d" 0 || fail "roshmd nodes did not start"
# Debian's binaries (ASan runtime preloaded in an ASan build) and ours
va="env $pre LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_A" vb="env $pre LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_B"
ca="env LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_A" cb="env LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_B"

# pair NAME 'SERVER CMD' 'CLIENT CMD' [RESULT_RE]: server on node a, client on b
pair() {
  local n=$1 s=$2 c=$3 re=${4:-}
  bg_a timeout 120 $va $s >"$d/$n.server" 2>&1
  srv=$BG_PID
  sleep 0.5
  if ! in_b timeout 120 $vb $c >"$d/$n.client" 2>&1; then
    cat "$d/$n.client" "$d/$n.server"; fail "$n: client failed"
  fi
  wait "$srv"; local rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/$n.server" "$d/$n.client"; fail "$n: server exited $rc"; }
  if [[ -n $re ]] && ! grep -Eq "$re" "$d/$n.client"; then
    cat "$d/$n.client"; fail "$n: no result line"
  fi
  echo "ok: $n"
}

# connect to node a's PORT from node b until it takes the connection, then
# send what stdin gives (the garbage of a hostile peer)
throw() {
  local port=$1 f=$2
  for _ in $(seq 100); do
    in_b bash -c "exec 3<>/dev/tcp/$ADDR_A/$port && cat '$f' >&3 && sleep 0.2" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "nobody listens on $ADDR_A:$port"
}

if [[ $mode == cm ]]; then
  bg_a timeout 120 $ca "$check" server "$ADDR_A" 7600 >"$d/check.server" 2>&1
  srv=$BG_PID
  in_b timeout 120 $cb "$check" client "$ADDR_A" 7600 >"$d/check.client" 2>&1 ||
    { cat "$d/check.client" "$d/check.server"; fail "rdmacm_check client"; }
  wait "$srv"; rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/check.server" "$d/check.client"; fail "rdmacm_check server exited $rc"; }
  cat "$d/check.server" "$d/check.client"
  in_a timeout 200 $ca "$check" local 7700 "$ADDR_A" >"$d/check.local" 2>&1 ||
    { cat "$d/check.local"; fail "rdmacm_check local"; }
  cat "$d/check.local"
  # two pods of node a (node a's roshmd, node a's GID) in two network
  # namespaces: the server in ns a, the client in ns b
  bg_a timeout 120 $ca "$check" server "$ADDR_A" 7610 >"$d/pods.server" 2>&1
  srv=$BG_PID
  in_b timeout 120 $ca "$check" client "$ADDR_A" 7610 >"$d/pods.client" 2>&1 ||
    { cat "$d/pods.client" "$d/pods.server"; fail "rdmacm_check client, a pod of node a in ns b"; }
  wait "$srv"; rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/pods.server" "$d/pods.client"; fail "rdmacm_check server exited $rc (two pods of node a)"; }
  echo "two pods of node a in two network namespaces: connected"
  # a peer on node b that gives node a's own GID with its QPNs
  # (rc_peer_claim_ok); P listens first, for V's active id
  bg_b timeout 120 $cb "$check" gid-p 7760 "$ADDR_A" "$ADDR_B" >"$d/gid.p" 2>&1
  gp=$BG_PID
  in_b bash -c 'for i in $(seq 100); do ss -ltn | grep -q ":7761 " && exit 0; sleep 0.1; done; exit 1' ||
    fail "rdmacm_check gid-p did not listen"
  in_a timeout 120 $ca "$check" gid-v 7760 "$ADDR_A" "$ADDR_B" >"$d/gid.v" 2>&1 ||
    { cat "$d/gid.v" "$d/gid.p"; fail "rdmacm_check gid-v"; }
  wait "$gp"; rc=$?; gp=
  [[ $rc == 0 ]] || { cat "$d/gid.p" "$d/gid.v"; fail "rdmacm_check gid-p exited $rc"; }
  cat "$d/gid.v" "$d/gid.p"

  # ucmatose's listener first gets garbage, then half a REQ from a peer that
  # leaves; it must still take its two connections
  head -c 4096 /dev/urandom > "$d/garbage"
  printf 'RCM1\001\001\000\044\000\000\000' > "$d/halfreq"
  bg_a timeout 120 $va ucmatose -C 0 -c 2 -p 7800 >"$d/ucma.server" 2>&1
  srv=$BG_PID
  throw 7800 "$d/garbage"
  throw 7800 "$d/halfreq"
  in_b timeout 120 $vb ucmatose -C 0 -c 2 -p 7800 -s "$ADDR_A" >"$d/ucma.client" 2>&1 ||
    { cat "$d/ucma.client" "$d/ucma.server"; fail "ucmatose client after garbage"; }
  wait "$srv"; rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/ucma.server"; fail "ucmatose server exited $rc"; }
  grep -q 'return status 0' "$d/ucma.client" || fail "ucmatose client: no 'return status 0'"
  echo "ok: ucmatose -C 0 -c 2 after garbage on its port"
  pair ucmatose-migrate "ucmatose -C 0 -c 3 -m -p 7801" "ucmatose -C 0 -c 3 -m -p 7801 -s $ADDR_A" 'return status 0'
  # cmtime: 20 connections, each step (id, resolve, QP, connect,
  # disconnect, destroy) for all at once, events from one channel; its
  # server runs until killed and must still be there
  bg_a timeout 120 $va cmtime -p 7805 >"$d/cmtime.server" 2>&1
  srv=$BG_PID
  sleep 0.5
  in_b timeout 60 $vb cmtime -s "$ADDR_A" -p 7805 -c 20 >"$d/cmtime.client" 2>&1 ||
    { cat "$d/cmtime.client" "$d/cmtime.server"; fail "cmtime client"; }
  kill -0 "$srv" 2>/dev/null || { cat "$d/cmtime.server"; fail "cmtime server left"; }
  th_stop "$srv"; srv=
  for st in 'create qp' connect disconnect; do
    grep -Eq "^$st +: +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+" "$d/cmtime.client" ||
      { cat "$d/cmtime.client"; fail "cmtime: no '$st' line"; }
  done
  echo "ok: cmtime -c 20: $(grep -E '^connect +:' "$d/cmtime.client" | tr -s ' ') (us / conn last)"

  # qperf: its own TCP exchange for keys, the CM for the QPs; polled CQs
  bg_a timeout 200 $va qperf >"$d/qperf.server" 2>&1
  srv=$BG_PID
  sleep 0.5
  for t in rc_rdma_write_poll_lat rc_rdma_read_lat rc_rdma_read_bw rc_fetch_add_mr rc_compare_swap_mr; do
    in_b timeout 60 $vb qperf "$ADDR_A" -cm1 -cp1 -t 2 $t >"$d/qperf.$t" 2>&1 ||
      { cat "$d/qperf.$t" "$d/qperf.server"; fail "qperf -cm1 $t"; }
    # a result, and not 0: something went through the QP the CM connected
    grep -Eq '(latency|bw|msg_rate) += +[0-9.,]*[1-9][0-9.,]* ' "$d/qperf.$t" || { cat "$d/qperf.$t"; fail "qperf $t: no result"; }
    echo "ok: qperf -cm1 $t: $(grep -E '(latency|bw|msg_rate) +=' "$d/qperf.$t" | tr -s ' ')"
  done
  th_stop "$srv"; srv=
  echo "$name: ok"
  exit 0
fi

# send: only where roshm0 has SEND/RECV and completion events
probe=$(in_a timeout 30 $ca "$check" probe 2>&1); rc=$?
if [[ $rc == 2 ]]; then
  echo "$name: skipped: roshm0 has no SEND/RECV or completion events yet ($probe)"
  exit 77
fi
[[ $rc == 0 ]] || fail "rdmacm_check probe exited $rc: $probe"
re='^ +[0-9]+ +[0-9]+ '
pair ib_write_lat-R "ib_write_lat -d roshm0 -R -n 200" "ib_write_lat -d roshm0 -R -n 200 $ADDR_A" "$re"
pair ib_read_lat-R "ib_read_lat -d roshm0 -R -n 200" "ib_read_lat -d roshm0 -R -n 200 $ADDR_A" "$re"
pair ib_atomic_lat-R "ib_atomic_lat -d roshm0 -R -n 200" "ib_atomic_lat -d roshm0 -R -n 200 $ADDR_A" "$re"
pair ib_send_lat-R "ib_send_lat -d roshm0 -R -n 200" "ib_send_lat -d roshm0 -R -n 200 $ADDR_A" "$re"
# UD through the CM (RDMA_PS_UDP, IB CM's SIDR): perftest -R -c UD gets the
# peer's QPN, Q_Key and address from rdma_ud_param; udaddy (port 7174, fixed)
# sends datagrams over 2 ids and answers through ibv_create_ah_from_wc
pair ib_send_lat-R-UD "ib_send_lat -d roshm0 -R -c UD -n 200" "ib_send_lat -d roshm0 -R -c UD -n 200 $ADDR_A" "$re"
pair ib_send_bw-R-UD "ib_send_bw -d roshm0 -R -c UD -n 1000" "ib_send_bw -d roshm0 -R -c UD -n 1000 $ADDR_A" "$re"
pair udaddy "udaddy -c 2 -C 20 -S 1000" "udaddy -c 2 -C 20 -S 1000 -s $ADDR_A" 'data transfers complete'
# multicast (rdmacm_mcast.c, mcast.c): mckey receivers, two ids in one
# process on node a and one on node b, join 239.1.2.3; once roshmctl lists
# their three member records, a sender on node b (itself a member) sends
# 20 datagrams and leaves; each receiver waits for all 20
mg=00000000000000000000ffffef010203
bg_a timeout 120 $va mckey -m 239.1.2.3 -b "$ADDR_A" -c 2 -C 20 >"$d/mckey.ra" 2>&1
mra=$BG_PID
bg_b timeout 120 $vb mckey -m 239.1.2.3 -b "$ADDR_B" -C 20 >"$d/mckey.rb" 2>&1
mrb=$BG_PID
for _ in $(seq 200); do
  [[ $(ctl_a --json regions "ibv-mc-$mg-" 2>/dev/null | grep -o "ibv-mc-$mg-" | wc -l) == 3 ]] && break
  sleep 0.1
done
ctl_a regions "ibv-mc-$mg-" | grep -c "ibv-mc-$mg-" | grep -qx 3 || fail "mckey: the receivers' member records are not listed"
in_b timeout 120 $vb mckey -m 239.1.2.3 -b "$ADDR_B" -s -C 20 >"$d/mckey.s" 2>&1 ||
  { cat "$d/mckey.s"; fail "mckey sender"; }
for r in mra mrb; do
  wait "${!r}" || { cat "$d/mckey.s" "$d/mckey.ra" "$d/mckey.rb"; fail "mckey receiver ($r) did not get all 20"; }
  printf -v "$r" ''
done
for r in ra rb; do
  grep -q 'return status 0' "$d/mckey.$r" || { cat "$d/mckey.$r"; fail "mckey receiver on node ${r#r}"; }
done
echo "ok: mckey -C 20: 3 receivers on 2 nodes got every datagram"
# libfabric's verbs provider (Debian's libfabric-bin): FI_EP_MSG (RC through
# the CM), FI_EP_RDM (ofi_rxm over those, messages and tagged) and
# FI_EP_DGRAM (UD); -c checks every message's bytes
for ep in "msg" "rdm" "rdm -m tagged"; do
  pair "fi_pingpong-$ep" "fi_pingpong -p verbs -e $ep -c -I 100" "fi_pingpong -p verbs -e $ep -c -I 100 $ADDR_A" '^1m +100 +=100 '
done
# fi_pingpong's dgram test injects its last datagram of each size unsignaled
# and then reads its control socket: the datagram must leave with nobody
# polling (the notifier's guard, docs/verbs-compat.md "Data path"); before
# that, one run in about 25 hung here
pair fi_pingpong-dgram "fi_pingpong -p verbs -e dgram -c -I 100" "fi_pingpong -p verbs -e dgram -c -I 100 $ADDR_A" '^4k +100 +=100 '
pair ucmatose "ucmatose -c 2 -p 7802" "ucmatose -c 2 -p 7802 -s $ADDR_A" 'data transfers complete'
pair rdma_server-client "rdma_server -s $ADDR_A -p 7803" "rdma_client -s $ADDR_A -p 7803" 'rdma_client: end 0'
# XRC through the CM (rdma_xserver -c x: rdma_create_ep of XRC_RECV on
# RDMA_PS_IB, rdma_create_srq's XRC SRQ, its number in the REP's private
# data; rdma_xclient -c x: an XRC_SEND QP whose SEND names it); the server
# ends 0 only once the RECV completed. Its RC mode too.
pair rdma_xserver-xrc "rdma_xserver -p 7806 -c x" "rdma_xclient -s $ADDR_A -p 7806 -c x" 'rdma_xclient: end 0'
pair rdma_xserver-rc "rdma_xserver -p 7807" "rdma_xclient -s $ADDR_A -p 7807" 'rdma_xclient: end 0'
# rping: buffers that share pages registered apart (overlapping MRs), RDMA
# READ and WRITE of the advertised buffers, SENDs, a completion channel
# thread; -v prints each ping's data, which the server READ from the client
pair rping "rping -s -a $ADDR_A -p 7804 -C 10 -S 100 -v" "rping -c -a $ADDR_A -p 7804 -C 10 -S 100 -v" 'ping data: rdma-ping-9: '
bg_a timeout 200 $va qperf >"$d/qperf.server" 2>&1
srv=$BG_PID
sleep 0.5
for t in rc_lat rc_bw; do
  in_b timeout 60 $vb qperf "$ADDR_A" -cm1 -t 2 $t >"$d/qperf.$t" 2>&1 ||
    { cat "$d/qperf.$t" "$d/qperf.server"; fail "qperf -cm1 $t"; }
  grep -Eq '(latency|bw) += +[0-9.,]*[1-9][0-9.,]* ' "$d/qperf.$t" || { cat "$d/qperf.$t"; fail "qperf $t: no result"; }
  echo "ok: qperf -cm1 $t: $(grep -E '(latency|bw) +=' "$d/qperf.$t" | tr -s ' ')"
done
th_stop "$srv"; srv=
echo "$name: ok"
