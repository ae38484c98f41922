#!/usr/bin/env bash
# Unmodified Debian perftest, qperf and fio (its rdma engine) through
# libroshm-verbs: two roshmd
# nodes with the tcp transport (network namespaces as root,
# scripts/twonode.sh), the server and client of each test in its node,
# LD_LIBRARY_PATH naming our libibverbs.so.1 and nothing else changed. The
# tools' own out-of-band TCP goes over the nodes' addresses (qperf: its
# default, non-CM exchange, completion events on). qperf's ver_rc_* tests
# check every atomic's result. Then verbs_check (ours) proves the bytes a
# WRITE or SEND sent are the ones in the receiver's buffer, READ / FETCH_ADD /
# CAS results, immediates, RNR and the tenant boundary, and verbs_ud the same
# for UD QPs (datagrams, GRH, Q_Keys, a hostile pod on a UD ring), and
# verbs_mcast for UD multicast groups (members on both nodes, forged
# records, another tenant's member), verbs_mw for memory windows, verbs_xrc
# for XRC domains, SRQs and QPs.
#   check_verbs_perftest.sh BUILD_ROOT VERBS_DIR VERBS_CHECK [SANITIZE]
# In an ASan build our libibverbs.so.1 is instrumented and perftest is not:
# the ASan runtime is preloaded into perftest (leak checks off there: its
# leaks are not ours), so the library is checked inside unmodified binaries.
set -u
# meson puts our libibverbs.so.1 on LD_LIBRARY_PATH (a linked target): roshmd
# itself must get the system one; only the applications get ours.
unset LD_LIBRARY_PATH
build=$1 vdir=$2 vcheck=$3 sanitize=${4:-none}
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../lib/cleanup.sh"
# unmodified binaries around our instrumented libraries: the ASan runtime preloaded
th_asan_pre "check_verbs_perftest" "$sanitize"
pre=$TH_PRE
for t in ib_write_lat ib_read_lat ib_atomic_lat ib_send_lat ib_send_bw ib_read_bw ib_atomic_bw qperf fio \
         ibv_devinfo ibv_rc_pingpong ibv_srq_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_xsrq_pingpong; do
  command -v $t >/dev/null || { echo "check_verbs_perftest: skipped: $t missing (Debian packages perftest, qperf, fio, ibverbs-utils)"; exit 77; }
done
[[ $(id -u) == 0 ]] && command -v ip >/dev/null || { echo "check_verbs_perftest: skipped: needs root and ip for network namespaces"; exit 77; }
d=$(th_tmpdir vperf)
TN_PREFIX=$(th_prefix vp)
. "$src/scripts/twonode.sh"
# a second tenant, for verbs_check's SEND to a QP that is not ours; grants
# per region past the 64 of before (verbs_check many_qps: 40 peer processes
# on one MR, the 41st refused), and not the 512 of the default (as many
# contexts, each a client with its channel)
TN_EXTRA_CONF='tenants = ( { name = "default"; token = ""; }, { name = "other"; token = "other-token"; } );
limits: { max_grants = 80; };'
export VERBS_CHECK_MAX_GRANTS=80
# pollers that spin 200 us after work, yielding their CPU meanwhile (the
# ROSHM_VERBS_YIELD pairs below share it with them)
TN_DATAPLANE='idle_yield = true;'
srv=
trap 'th_stop "$srv"; twonode_down >/dev/null 2>&1; th_eal_rm "$TN_PREFIX-a"; th_eal_rm "$TN_PREFIX-b"; th_rmdir "$d"' EXIT
fail() { echo "FAIL: $*"; tail -n 20 "$d"/node-*.log; exit 1; }
twonode_up "$build" "$d" 200 || fail "roshmd nodes did not start"
va="env $pre ROSHM_VERBS_DEBUG=1 LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_A"
vb="env $pre LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_B"
# verbs_check is built with the rest (instrumented in an ASan build): no preload
ca="env LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_A" cb="env LD_LIBRARY_PATH=$vdir ROSHM_SOCK=$SOCK_B"

# -F: a report even when perftest's clock calibration fails on a loaded
# machine ("Correlation coefficient r^2 < 0.9", then "Can't produce a report"
# and exit 1 without it); the figures are not what this test checks.
# listening PORT PID: until the server PID listens on TCP PORT in node a
# (10 s at most; a server that died is its client's to report), in place of
# a fixed half second before each client
listening() {
  local k
  for k in $(seq 200); do
    in_a ss -Hltn "sport = :$1" | grep -q . && return 0
    kill -0 "$2" 2>/dev/null || return 0
    sleep 0.05
  done
}
run_pair() {   # name args...
  local name=$1; shift
  bg_a $va "$name" -d roshm0 -F "$@" >"$d/$name.server" 2>&1
  srv=$BG_PID
  listening 18515 "$srv"
  if ! in_b timeout 60 $vb "$name" -d roshm0 -F "$@" "$ADDR_A" >"$d/$name.client" 2>&1; then
    cat "$d/$name.client" "$d/$name.server"; fail "$name client failed"
  fi
  wait "$srv"; local rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/$name.server"; fail "$name server exited $rc"; }
  grep -E '^ +[0-9]+ +[0-9]+ ' "$d/$name.client" || { cat "$d/$name.client"; fail "$name printed no result line"; }
  # --use-srq: the server's RECVs went to an SRQ (perftest says so)
  [[ " $* " != *" --use-srq "* ]] || grep -qE 'SRQ +: ON' "$d/$name.server" ||
    { cat "$d/$name.server"; fail "$name: the server did not use an SRQ"; }
  echo "ok: $name $*"
}

run_pair ib_write_lat -n 200
run_pair ib_write_lat -n 200 -s 4096
run_pair ib_read_lat -n 200
run_pair ib_atomic_lat -n 200
run_pair ib_atomic_lat -n 200 -A CMP_AND_SWAP
run_pair ib_write_bw -n 200
run_pair ib_write_bw -n 2000 -s 64
# more QPs to one peer than an MR's region has grants (64): one per process
run_pair ib_write_bw -n 200 -q 64
run_pair ib_read_bw -n 200
run_pair ib_atomic_bw -n 200
run_pair ib_send_lat -n 200
run_pair ib_send_lat -n 200 -s 4096
run_pair ib_send_bw -n 200
run_pair ib_send_lat -n 200 -e
run_pair ib_send_bw -n 200 -e
# shared receive queues (srq.c): one SRQ for the server's QPs, and 4 QPs on it
run_pair ib_send_lat -n 200 --use-srq
run_pair ib_send_bw -n 200 --use-srq
run_pair ib_send_bw -n 200 -q 4 -s 8192 --use-srq
# buffers on huge pages (perftest's SysV SHM_HUGETLB segments): each MR
# takes the huge pages around it whole (mr.c); verbs_check's huge_mr checks
# the bytes
if (( $(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo) >= 32 )); then
  run_pair ib_write_bw -n 200 --use_hugepages
  run_pair ib_send_lat -n 200 --use_hugepages
else
  echo "check_verbs_perftest: --use_hugepages not run: fewer than 32 free huge pages (scripts/host-setup.sh reserves them)"
fi
# UC QPs (SEND and RDMA WRITE)
run_pair ib_send_lat -n 200 -c UC
run_pair ib_write_bw -n 200 -c UC
# UD QPs (ud.c): datagrams up to the MTU, address handles
run_pair ib_send_lat -n 200 -c UD
run_pair ib_send_bw -n 200 -c UD
run_pair ib_send_bw -n 1000 -s 64 -c UD
# UD QPs on an SRQ (ud.c): perftest's server on one, and 4 QPs on one
run_pair ib_send_lat -n 200 -c UD --use-srq
run_pair ib_send_bw -n 1000 -q 4 -s 1024 -c UD --use-srq
# XRC (xrc.c): XRC_SEND QPs to the server's XRC_RECV QPs, whose messages
# go to its XRC SRQ; 4 QPs on one SRQ; both ways (-b); every operation
for a in "ib_send_lat -n 200" "ib_send_lat -n 200 -e" "ib_send_bw -n 200" "ib_send_bw -n 200 -q 4 -s 8192" \
         "ib_send_bw -n 200 -b" "ib_write_lat -n 200" "ib_write_bw -n 200" "ib_read_lat -n 200" \
         "ib_read_bw -n 200" "ib_atomic_lat -n 200" "ib_atomic_bw -n 200"; do
  # shellcheck disable=SC2086
  run_pair $a -c XRC
done
# rdma-core's own examples (ibverbs-utils), unmodified: what a user runs first
$va ibv_devinfo -v -d roshm0 >"$d/devinfo" 2>&1 || { cat "$d/devinfo"; fail "ibv_devinfo"; }
for want in 'hca_id:.roshm0' 'state:.*PORT_ACTIVE' 'link_layer:.*Ethernet' 'GID\[ *0\]:.*fe80::.*RoCE v2' \
            'max_srq_wr:.*16384' 'atomic_cap:.*ATOMIC_HCA' '^\s+XRC$'; do
  grep -qE "$want" "$d/devinfo" || { cat "$d/devinfo"; fail "ibv_devinfo printed no line like $want"; }
done
echo "ok: ibv_devinfo -v -d roshm0"
pingpong() {   # name args...: the server in node a, the client in node b
  local name=$1; shift
  bg_a $va "$name" -d roshm0 -g 0 "$@" >"$d/$name.server" 2>&1
  srv=$BG_PID
  listening 18515 "$srv"
  in_b timeout 60 $vb "$name" -d roshm0 -g 0 "$@" "$ADDR_A" >"$d/$name.client" 2>&1 ||
    { cat "$d/$name.client" "$d/$name.server"; fail "$name client failed"; }
  wait "$srv"; local rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/$name.server"; fail "$name server exited $rc"; }
  for side in client server; do   # each side checks every message's size
    grep -qE '^[0-9]+ iters in ' "$d/$name.$side" || { cat "$d/$name.$side"; fail "$name $side printed no result"; }
  done
  echo "ok: $name $*"
}
# -c: each side checks the bytes of every message it receives
pingpong ibv_rc_pingpong -n 200 -c
pingpong ibv_rc_pingpong -n 200 -c -e -s 20000  # completion channel, fragments
pingpong ibv_rc_pingpong -n 200 -c -N           # ibv_create_qp_ex, ibv_wr_* (new post-send API)
# -t: completion timestamps (ibv_create_cq_ex); roshm0's clock says 1 GHz,
# so each side's average of cycles between receive completions must be its
# own usec/iter in ns (the same interval measured twice; within 2x)
pingpong ibv_rc_pingpong -n 200 -c -t
for side in client server; do
  awk '/usec\/iter/ { u = $(NF-1) } /^Average receive completion clock cycles/ { c = $NF }
       END { exit !(u > 0 && c > 0 && c / (u * 1000) > 0.5 && c / (u * 1000) < 2) }' \
      "$d/ibv_rc_pingpong.$side" || { cat "$d/ibv_rc_pingpong.$side"; fail "ibv_rc_pingpong -t: $side's timestamps do not match its clock"; }
done
# -t -e: after each event ibv_start_poll must find a completion ("poll CQ
# failed 2" otherwise): completions the application's own poll took in and
# handed over fire no event (cq.c)
pingpong ibv_rc_pingpong -n 200 -c -t -e
pingpong ibv_srq_pingpong -n 200 -c             # 16 QPs on one SRQ
pingpong ibv_uc_pingpong -n 200 -c              # UC QPs
pingpong ibv_ud_pingpong -n 200 -c              # UD QPs: 2048-byte datagrams
pingpong ibv_ud_pingpong -n 200 -c -e -s 4000   # UD, completion channel, near the MTU
# rdma-core's XRC example: the server's SRQ serves each client's XRC_SEND QP
# through an XRC_RECV QP of its own; both sides check every message's size
# and opcode; NCLIENTS clients at once
xsrq() {   # NCLIENTS args...
  local nc=$1 pids=() i; shift
  bg_a $va ibv_xsrq_pingpong -d roshm0 -g 0 -c "$nc" "$@" >"$d/xsrq.server" 2>&1
  srv=$BG_PID
  listening 18515 "$srv"
  for ((i = 0; i < nc; i++)); do
    in_b timeout 60 $vb ibv_xsrq_pingpong -d roshm0 -g 0 "$@" "$ADDR_A" >"$d/xsrq.client$i" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { cat "$d/xsrq.client$i" "$d/xsrq.server"; fail "ibv_xsrq_pingpong client $i"; }
    grep -q '^success$' "$d/xsrq.client$i" || { cat "$d/xsrq.client$i"; fail "ibv_xsrq_pingpong client $i: no success"; }
  done
  wait "$srv"; local rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/xsrq.server"; fail "ibv_xsrq_pingpong server exited $rc"; }
  grep -q '^success$' "$d/xsrq.server" || { cat "$d/xsrq.server"; fail "ibv_xsrq_pingpong server: no success"; }
  echo "ok: ibv_xsrq_pingpong -c $nc $*"
}
xsrq 1 -n 200
xsrq 1 -n 200 -e    # completion channel on the SRQ's CQ
xsrq 2 -n 200

# An application that shares the poller's CPU (docs/verbs-compat.md): both
# sides on the last CPU, the pollers' (lcore from the affinity), yielding at
# each post and empty poll as the pollers do while they spin
va0=$va vb0=$vb cpu=$(( $(nproc) - 1 ))
va="$va ROSHM_VERBS_YIELD=1 taskset -c $cpu" vb="$vb ROSHM_VERBS_YIELD=1 taskset -c $cpu"
run_pair ib_write_lat -n 200
run_pair ib_read_lat -n 200
run_pair ib_send_bw -n 200
va=$va0 vb=$vb0

# qperf: the server in node a, the client in node b; -vvs prints any error count
bg_a $va qperf >"$d/qperf.server" 2>&1
srv=$BG_PID
listening 19765 "$srv"
qtests="rc_rdma_write_lat rc_rdma_read_bw rc_lat rc_bw rc_compare_swap_mr rc_fetch_add_mr ver_rc_compare_swap ver_rc_fetch_add
        uc_lat uc_bw uc_rdma_write_lat uc_rdma_write_bw ud_lat ud_bw"
# shellcheck disable=SC2086
if ! in_b timeout 60 $vb qperf -t 1 -vvs "$ADDR_A" $qtests >"$d/qperf.client" 2>&1; then
  cat "$d/qperf.client" "$d/qperf.server"; fail "qperf client failed"
fi
th_stop "$srv"; srv=
cat "$d/qperf.client"
for t in $qtests; do   # each test's header, its figure on the next line ("1,000 MB/sec" too)
  grep -A1 "^$t:\$" "$d/qperf.client" | grep -qE '^ +(latency|bw|send_bw|msg_rate) += +[0-9][0-9.,]* ' ||
    fail "qperf printed no result for $t"
done
! grep -E 'errors|failed' "$d/qperf.client" || fail "qperf counted errors"
echo "ok: qperf $qtests"

# fio's rdma engine (rdma_cm, a storage benchmark's client): RDMA WRITE,
# READ and SEND of 64 KiB blocks at depth 4 into a server that takes 16.
# In send mode it connects with rnr_retry 0: its server's ring fills while
# its RECVs wait (verbs_rnr below says why that is no RNR).
for verb in write read send; do
  bg_a $va fio --name=recv --ioengine=rdma --port=19000 --rw=read --bs=64k --size=8m \
    --iodepth=16 >"$d/fio.$verb.server" 2>&1
  srv=$BG_PID
  listening 19000 "$srv"
  if ! in_b timeout 60 $vb fio --name=send --ioengine=rdma --hostname="$ADDR_A" --port=19000 \
       --verb=$verb --rw=write --bs=64k --size=8m --iodepth=4 >"$d/fio.$verb.client" 2>&1; then
    cat "$d/fio.$verb.client" "$d/fio.$verb.server"; fail "fio --verb=$verb client failed"
  fi
  wait "$srv"; rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/fio.$verb.server"; fail "fio --verb=$verb server exited $rc"; }
  grep -q 'err= 0' "$d/fio.$verb.client" && grep -q 'io=8192KiB' "$d/fio.$verb.client" ||
    { cat "$d/fio.$verb.client"; fail "fio --verb=$verb did not move 8 MiB without error"; }
  echo "ok: fio --ioengine=rdma --verb=$verb: $(grep -Eo '(write|read): IOPS=[^,]*, BW=[^ ]*' "$d/fio.$verb.client")"
done

vevents=$(dirname "$vcheck")/verbs_events
if [[ -x $vevents ]]; then
  # async events, resize, fork, strings (verbs_events.c), in node a
  $ca "$vevents" >"$d/events" 2>&1 || { cat "$d/events"; fail "verbs_events"; }
  cat "$d/events"
  grep -q 'verbs_events: ok' "$d/events" || fail "verbs_events did not finish"
fi
vunload=$(dirname "$vcheck")/verbs_unload
if [[ -x $vunload ]]; then
  # our libibverbs.so.1 dlclosed with a context open (Open MPI's finalize):
  # its notifier thread must not outlive it (the context stays open on
  # purpose: no leak check)
  $ca ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 "$vunload" >"$d/unload" 2>&1 || { cat "$d/unload"; fail "verbs_unload"; }
  cat "$d/unload"
fi
# a full ring whose owner has RECVs waiting is not RNR (verbs_rnr.c: two
# processes of node a, the sender at rnr_retry 0, as fio's rdma engine)
$ca timeout 60 "$(dirname "$vcheck")/verbs_rnr" >"$d/rnr" 2>&1 || { cat "$d/rnr"; fail "verbs_rnr"; }
cat "$d/rnr"
grep -q 'verbs_rnr: ok' "$d/rnr" || fail "verbs_rnr did not finish"
# ours_pair PROG PORT NAME [MODE]: PROG's MODE-server in node a (a second
# tenant for its tenant checks), its MODE-client in node b; both must exit 0
ours_pair() {
  local prog=$1 port=$2 name=$3 mode=${4:+$4-} rc
  bg_a $ca VERBS_CHECK_OTHER=other:other-token "$prog" ${mode}server "$ADDR_A" "$port" >"$d/$name.server" 2>&1
  srv=$BG_PID
  listening "$port" "$srv"
  in_b timeout 90 $cb "$prog" ${mode}client "$ADDR_A" "$port" >"$d/$name.client" 2>&1 ||
    { cat "$d/$name.client" "$d/$name.server"; fail "$name client"; }
  wait "$srv"; rc=$?; srv=
  [[ $rc == 0 ]] || { cat "$d/$name.server" "$d/$name.client"; fail "$name server exited $rc"; }
  cat "$d/$name.client" "$d/$name.server"
}
vud=$(dirname "$vcheck")/verbs_ud
if [[ -x $vud ]]; then
  # UD QPs (verbs_ud.c): bytes, GRH, Q_Keys, length errors, a hostile pod of
  # the tenant on the ring, another tenant's datagrams
  ours_pair "$vud" 7598 ud
  grep -q "a QP of another tenant sent to ours: nothing arrived" "$d/ud.server" || fail "verbs_ud: the tenant check did not run"
  grep -q "a datagram to a new destination arrived while its sender polled nothing" "$d/ud.server" || fail "verbs_ud: the unpolled-sender check did not run"
  grep -q "two UD QPs on one SRQ: 4 datagrams" "$d/ud.server" || fail "verbs_ud: the SRQ check did not run"
  grep -q "whose MR was deregistered and unmapped failed with LOC_PROT_ERR" "$d/ud.client" || fail "verbs_ud: the deregistered-MR check did not run"
  grep -q "the QP went to SQE (its RECV kept and took a datagram, a send flushed) and sent again after RTS" "$d/ud.client" || fail "verbs_ud: the SQE check did not run"
fi
vmc=$(dirname "$vcheck")/verbs_mcast
if [[ -x $vmc ]]; then
  # UD multicast (verbs_mcast.c): members on both nodes get each datagram
  # once, a forged member record, a QP that left and another tenant's
  # member get nothing, no record outlives its QP
  ours_pair "$vmc" 7596 mcast
  grep -q "another tenant's member of G got nothing" "$d/mcast.server" || fail "verbs_mcast: the tenant check did not run"
  grep -q "verbs_mcast client: ok" "$d/mcast.client" || fail "verbs_mcast: the client did not finish"
fi
vmw=$(dirname "$vcheck")/verbs_mw
if [[ -x $vmw ]]; then
  # memory windows (verbs_mw.c): type 1 and 2 binds, WRs through them and
  # past them, LOCAL_INV, SEND_WITH_INV, the bind errors
  ours_pair "$vmw" 7595 mw
  grep -q "verbs_mw server: ok$" "$d/mw.server" || fail "verbs_mw: the server did not finish"
  grep -q "verbs_mw client: ok$" "$d/mw.client" || fail "verbs_mw: the client did not finish"
  # tcp: the owner's node holds the requester's node to its grants as they
  # are when each request arrives, so the first WRITE after the unbind
  # (the MR itself allows READ only) is refused
  grep -q "WRITE through the unbound type 1 window: refused (0 passed before)" "$d/mw.client" ||
    fail "verbs_mw: a WRITE passed through the unbound window after the unbind completed"
fi
vxrc=$(dirname "$vcheck")/verbs_xrc
if [[ -x $vxrc ]]; then
  # XRC (verbs_xrc.c): bytes through two SRQs of a domain, one-sided WRs on
  # the SRQs' PD, a PD none of them is on, another domain's SRQ
  ours_pair "$vxrc" 7593 xrc
  grep -q "verbs_xrc server: ok$" "$d/xrc.server" || fail "verbs_xrc: the server did not finish"
  grep -q "verbs_xrc client: ok$" "$d/xrc.client" || fail "verbs_xrc: the client did not finish"
fi
vrp=$(dirname "$vcheck")/verbs_rkey_peer
if [[ -x $vrp ]]; then
  # an rkey reaches the MRs of the process at the other end of the QP only
  # (verbs_rkey_peer.c): the victim on node a, a hostile and an honest peer
  # on node b; the victim's own MR and the honest peer's, named as the
  # hostile peer's buffer, are refused and keep their bytes
  mkdir -p "$d/rkp"
  bg_b $cb "$vrp" c "$d/rkp" >"$d/rkp.c" 2>&1; rkc=$BG_PID
  bg_b $cb "$vrp" b "$d/rkp" >"$d/rkp.b" 2>&1; rkb=$BG_PID
  in_a timeout 120 $ca "$vrp" v "$d/rkp" >"$d/rkp.v" 2>&1; rkv=$?
  wait "$rkb"; rkbr=$?; wait "$rkc"; rkcr=$?
  cat "$d/rkp.v" "$d/rkp.b" "$d/rkp.c"
  [[ $rkv == 0 && $rkbr == 0 && $rkcr == 0 ]] ||
    fail "verbs_rkey_peer: victim $rkv, hostile peer $rkbr, honest peer $rkcr"
  grep -q "verbs_rkey_peer v: ok" "$d/rkp.v" || fail "verbs_rkey_peer: the victim did not finish"
fi
if [[ -x $vcheck ]]; then
  # SRQ fairness (verbs_check.c srq_fair), in a process of its own on node a
  $ca "$vcheck" srq-fair >"$d/check.srqfair" 2>&1 || { cat "$d/check.srqfair"; fail "verbs_check srq-fair"; }
  cat "$d/check.srqfair"
  ours_pair "$vcheck" 7599 check
  # a RECV posted before RTR, then a receiver that polls nothing (fresh processes)
  ours_pair "$vcheck" 7597 unpolled unpolled
  grep -q "completed while we polled nothing (RECV posted before RTR)" "$d/unpolled.server" || fail "verbs_check unpolled did not run"
  # an rkey whose grant reaches the registry 1 s late (the server holds the
  # file registry's lock on its tenant's directory meanwhile): the WRITE waits
  export VERBS_CHECK_REGDIR=$d/registry/regions/default
  ours_pair "$vcheck" 7594 lategrant lategrant
  unset VERBS_CHECK_REGDIR
  grep -q "reached the registry 1000 ms late waited for it and landed" "$d/lategrant.server" ||
    fail "verbs_check lategrant did not run"
  grep -q "QP of another tenant received nothing, its MR" "$d/check.server" || fail "verbs_check: the tenant check did not run"
  grep -q "arrived while its sender polled nothing, and another while we polled nothing" "$d/check.server" || fail "verbs_check: the unpolled check did not run"
  grep -q "MRs sharing pages (one deregistered early): every byte.*reaches the new pages" "$d/check.server" || fail "verbs_check: the overlapping MRs check did not run"
  grep -q "a pod of the tenant that opens a live MR by its rkey, or a live QP's ring by its QPN -> EACCES" "$d/check.server" || fail "verbs_check: the rkey-guess check did not run"
  grep -q "MR of our second PD (no QP) was not written" "$d/check.server" || fail "verbs_check: the second-PD check did not run"
  grep -q "not connected to -> REM_ACCESS_ERR" "$d/check.client" || fail "verbs_check: the second-PD WRITE did not run"
  grep -q "QPs of one process on one PD all connect; the QP of peer process 41 refused at RTR with ENOMEM" "$d/check.server" || fail "verbs_check: the many-QPs check did not run"
fi
echo "check_verbs_perftest: ok"
