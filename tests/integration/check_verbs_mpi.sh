#!/usr/bin/env bash
# MPI through libroshm-verbs: Debian's Open MPI (pml ucx for messages, osc
# ucx for windows, so UCX's rc_verbs and ud_verbs transports on roshm0),
# unmodified, between two roshmd nodes with the tcp transport (network
# namespaces as root, scripts/twonode.sh). mpirun starts both ranks in node
# a's namespace (it launches no remote daemons here), rank 0 attached to
# node a's roshmd and rank 1 to node b's (ROSHM_SOCK), so every byte between
# them crosses roshmd's tcp transport between the namespaces; UCX_TLS names
# only the verbs transports (no shared memory between the ranks).
#   - NetPIPE's NPopenmpi -i (Debian's netpipe-openmpi): its integrity check
#     of MPI_Send / MPI_Recv from 1 byte to 4 MiB, eager and rendezvous;
#   - tests/integration/mpi_check.py (mpi4py): Sendrecv both ways, Put, Get,
#     Accumulate, Fetch_and_op from both ranks on one counter and
#     Compare_and_swap on an MPI window, each value checked; device atomics
#     (UCX_ATOMIC_MODE=device: roshm0's FETCH_ADD and CMP_AND_SWP, never
#     UCX's software emulation);
#   - NPopenmpi -i again over libfabric (pml cm, mtl ofi: verbs;ofi_rxm);
#   - Debian's MPICH (ch4:ucx) the same way, its ranks told that they are on
#     different nodes (MPIR_CVAR_NOLOCAL): NPmpich2 -i, then
#     tests/integration/mpi_rma.c (mpi_check.py's checks in C: Debian's
#     mpi4py is Open MPI's), built by meson with mpicc.mpich.
# Any UCX warning or error fails the test.
#   check_verbs_mpi.sh BUILD_ROOT VERBS_DIR SANITIZE MPI_RMA
# In an ASan build the ASan runtime is preloaded into the ranks, as
# check_verbs_ucx does for ucx_perftest.
set -u
unset LD_LIBRARY_PATH   # roshmd and mpirun get the system libibverbs; only the ranks get ours
build=$1 vdir=$2 sanitize=${3:-none} mpi_rma=${4:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/../lib/cleanup.sh"
# unmodified binaries around our instrumented libraries: the ASan runtime preloaded
th_asan_pre "check_verbs_mpi" "$sanitize"
pre=$TH_PRE
for t in mpirun.openmpi NPopenmpi ucx_info mpiexec.mpich NPmpich2; do
  command -v $t >/dev/null || { echo "check_verbs_mpi: skipped: $t missing (Debian packages openmpi-bin, netpipe-openmpi, ucx-utils, mpich, netpipe-mpich2)"; exit 77; }
done
[[ -x $mpi_rma ]] || { echo "check_verbs_mpi: skipped: no mpi_rma built (meson needs mpicc.mpich, Debian package mpich)"; exit 77; }
py=/usr/bin/python3   # Debian's, which has python3-mpi4py (not a pyenv one)
$py -c 'import mpi4py' 2>/dev/null || { echo "check_verbs_mpi: skipped: no mpi4py for $py (Debian package python3-mpi4py)"; exit 77; }
[[ $(id -u) == 0 ]] && command -v ip >/dev/null || { echo "check_verbs_mpi: skipped: needs root and ip for network namespaces"; exit 77; }
th_uverbs_node || { echo "check_verbs_mpi: skipped: cannot make /dev/infiniband/uverbs-roshm0"; exit 77; }
d=$(th_tmpdir vmpi)
TN_PREFIX=$(th_prefix vm)
. "$src/scripts/twonode.sh"
TN_DATAPLANE='idle_yield = true;'
trap 'twonode_down >/dev/null 2>&1; th_eal_rm "$TN_PREFIX-a"; th_eal_rm "$TN_PREFIX-b"; th_rmdir "$d";
      th_uverbs_rm' EXIT
fail() { echo "FAIL: $*"; tail -n 20 "$d"/node-*.log; exit 1; }
twonode_up "$build" "$d" 200 || fail "roshmd nodes did not start"

# Each rank's environment. ROSHM_VERBS_YIELD=1: UCX polls without a pause
# and two such ranks would keep the pollers off this machine's 2 CPUs
# (check_verbs_ucx.sh); UCX_IB_ALLOC: no SysV huge pages for UCX's buffers
# (docs/verbs-compat.md, "UCX"). mpirun's -x would reach only the first
# rank of an MPMD line: env sets them per rank.
u="$pre LD_LIBRARY_PATH=$vdir UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=roshm0:1"
u="$u UCX_IB_ALLOC=thp,mmap,heap UCX_ATOMIC_MODE=device ROSHM_VERBS_YIELD=1"
# MCA: the MPI layers (UCX's by default)
MCA="--mca pml ucx --mca osc ucx --mca btl self"
# LAUNCH: Open MPI's (mpirun.openmpi: which MPI `mpirun` names depends on
# what else is installed)
LAUNCH="mpirun.openmpi --allow-run-as-root --oversubscribe"
# SQEs node a's roshmd took from its clients: each run must move its bytes
# through it (else the ranks found another way, as MPI's shared memory)
sqes() { ctl_a --json stats | $py -c 'import json, sys; print(json.load(sys.stdin)["sqes"])'; }
mpi() {   # NAME COMMAND...: rank 0 on node a, rank 1 on node b
  local name=$1 s0; shift
  s0=$(sqes) || fail "roshmctl stats"
  if ! (cd "$d" && in_a timeout 180 $LAUNCH $MCA \
        -np 1 env $u ROSHM_SOCK=$SOCK_A "$@" : -np 1 env $u ROSHM_SOCK=$SOCK_B "$@" \
        >"$d/$name.out" 2>&1 </dev/null); then
    cat "$d/$name.out"; fail "mpirun $name"
  fi
  ! grep -E 'UCX +(ERROR|WARN)' "$d/$name.out" || fail "$name: UCX complained"
  s0=$(( $(sqes) - s0 ))
  (( s0 >= 1000 )) || fail "$name: only $s0 SQEs through node a's roshmd: the ranks did not talk through roshm0"
}

# netpipe NAME MIN LAST WHAT UPTO [NP]: NetPIPE's (NP, NPopenmpi by
# default) -i report in NAME.out has at least MIN sizes passed, LAST bytes
# among them, and no failure
netpipe() {
  local name=$1 min=$2 last=$3 what=$4 upto=$5 np=${6:-NPopenmpi} passed
  passed=$(grep -c 'Integrity check passed' "$d/$name.out")
  if grep -qi 'Integrity check failed' "$d/$name.out" || (( passed < min )) ||
     ! grep -q " $last bytes .*Integrity check passed" "$d/$name.out"; then
    cat "$d/$name.out"; fail "$np -i$what: $passed sizes passed"
  fi
  echo "ok: NetPIPE $np -i$what: integrity check passed at $passed message sizes, 1 B to $upto"
}

mpi netpipe NPopenmpi -i -u 4194304 -o "$d/np.out"
# 1 B to 3 MiB + 1 in 40 steps (-u stops it before 4 MiB)
netpipe netpipe 40 3145729 "" "3 MiB"

mpi rma $py "$src/tests/integration/mpi_check.py"
grep -q '^mpi_check: ok' "$d/rma.out" || { cat "$d/rma.out"; fail "mpi_check.py did not finish"; }
grep '^mpi_check: ' "$d/rma.out"

# Open MPI over libfabric instead of UCX: pml cm with mtl ofi, libfabric's
# verbs provider under ofi_rxm (RC QPs through our librdmacm). At
# MPI_Finalize Open MPI dlcloses libfabric and with it our libibverbs.so.1,
# contexts still open (verbs_unload checks that alone).
MCA="--mca pml cm --mca mtl ofi --mca btl self"
u="$u FI_PROVIDER=verbs;ofi_rxm"
mpi ofi NPopenmpi -i -u 262144 -o "$d/np-ofi.out"
netpipe ofi 30 196609 " over libfabric (mtl ofi, verbs;ofi_rxm)" "192 KiB"

# MPICH (ch4:ucx): its hydra launcher, no MCA; without MPIR_CVAR_NOLOCAL
# two ranks on one host would talk through MPICH's shared memory
LAUNCH=mpiexec.mpich MCA=
u="${u% FI_PROVIDER=*} MPIR_CVAR_NOLOCAL=1"
mpi mpich-netpipe NPmpich2 -i -u 4194304 -o "$d/np-mpich.out"
netpipe mpich-netpipe 40 3145729 " (MPICH, ch4:ucx)" "3 MiB" NPmpich2
mpi mpich-rma "$mpi_rma"
grep -q '^mpi_rma: ok' "$d/mpich-rma.out" || { cat "$d/mpich-rma.out"; fail "mpi_rma (MPICH) did not finish"; }
grep '^mpi_rma: ' "$d/mpich-rma.out"
echo "check_verbs_mpi: ok"
