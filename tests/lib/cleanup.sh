# Sourced by the check_*.sh tests: scratch directories named for this run
# (tests/check_leftovers.sh looks for them) and a daemon stop that cannot hang.
# shellcheck shell=bash

# th_tmpdir WHAT: a new /tmp/roshm-test-TAG-WHAT.XXXXXX
th_tmpdir() {
  mktemp -d "/tmp/roshm-test-${ROSHM_TEST_TAG:-manual}-$1.XXXXXX"
}

# th_stop PID: SIGCONT (it may have been stopped) and SIGTERM, SIGKILL after
# 10 s; reap it. Prints nothing; the exit status is the process's.
th_stop() {
  local pid=$1
  [[ -n $pid ]] || return 0
  kill -CONT "$pid" 2>/dev/null
  kill -TERM "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return; }
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

# th_prefix WHAT: an EAL --file-prefix for this run (check_leftovers.sh
# looks for its runtime directory)
th_prefix() {
  echo "${ROSHM_TEST_TAG:-manual}-$1$$"
}

# th_eal_rm PREFIX: EAL's runtime directory for it (left even by a clean exit)
th_eal_rm() {
  if [[ $(id -u) == 0 ]]; then rm -rf "/var/run/dpdk/$1"; else rm -rf "${XDG_RUNTIME_DIR:-/tmp}/dpdk/$1"; fi
}

# th_rmdir DIR: remove it unless ROSHM_TEST_KEEP=1 (then say where it is)
th_rmdir() {
  if [[ ${ROSHM_TEST_KEEP:-0} != 0 ]]; then
    echo "kept: $1" >&2
  else
    rm -rf "$1"
  fi
}

# th_ports N: a port P with P..P+N-1 free on 127.0.0.1 (TCP), picked at random
# below the kernel's ephemeral range (an outgoing connection of another test
# takes its local port from that range, so a port picked there can be taken
# between this check and the daemon's bind; CI once lost a run to that)
th_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    p = random.randrange(10000, min(lo, 32768) - n)
    try:
        for q in range(p, p + n):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
    except OSError:
        continue
    print(p); sys.exit(0)
sys.exit("th_ports: no free ports")
PY
}

# UCX lists roshm0 only when /dev/infiniband/uverbs-roshm0 is a character
# device (it never opens it): th_uverbs_node makes it a /dev/null node (1:3)
# when missing, th_uverbs_rm removes what it made (docs/verbs-compat.md, "UCX").
th_uverbs_node() {
  TH_UVERBS=/dev/infiniband/uverbs-roshm0 TH_UVERBS_MADE= TH_UVERBS_DIR=
  [[ -e $TH_UVERBS ]] && return 0
  if [[ ! -d /dev/infiniband ]]; then mkdir /dev/infiniband || return 1; TH_UVERBS_DIR=1; fi
  mknod -m 666 "$TH_UVERBS" c 1 3 || return 1
  TH_UVERBS_MADE=1
}
th_uverbs_rm() {
  [[ -n ${TH_UVERBS_MADE:-} ]] && rm -f "$TH_UVERBS"
  [[ -n ${TH_UVERBS_DIR:-} ]] && rmdir /dev/infiniband
  return 0
}

# th_asan_pre NAME SANITIZE: in an ASan build (SANITIZE names address), the
# unmodified binaries around our instrumented libraries need the ASan runtime
# preloaded: TH_PRE gets the env words for it (leak checks off there: their
# leaks are not ours), else nothing; without clang-14's shared runtime the
# test NAME is skipped (77).
th_asan_pre() {
  TH_PRE=
  [[ $2 == *address* ]] || return 0
  local rt
  rt=$(clang-14 -print-file-name=libclang_rt.asan-x86_64.so 2>/dev/null)
  [[ -f $rt ]] || { echo "$1: skipped: ASan build without clang-14's shared ASan runtime"; exit 77; }
  TH_PRE="LD_PRELOAD=$rt ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0"
}
