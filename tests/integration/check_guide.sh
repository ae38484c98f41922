#!/usr/bin/env bash
# docs/guide.md is real, the way a newcomer uses it:
#  - every C, make and meson block is either a file of the guide's first
#    application (<!-- file: NAME -->) or a verbatim excerpt of a file of
#    this repository (<!-- from: PATH -->); a block that is neither fails;
#  - every repository path the guide names exists;
#  - libroshm installed by `meson install` (into a scratch root) works
#    through its pkg-config file: the guide's Makefile and meson.build build
#    the guide's hello.c with it, without a warning;
#  - hello owner and hello writer run on two roshmd nodes over tcp
#    (scripts/twonode.sh, as the guide does) and print what the guide shows.
# In a sanitizer build (SANITIZE not "none") libroshm is instrumented for the
# compiler that built it: the program is compiled there, not linked or run.
#   check_guide.sh SRC BUILD [SANITIZE]
set -u
src=$1 build=$2 san=${3:-none}
. "$src/tests/lib/cleanup.sh"
for t in python3 make pkg-config meson ninja cc; do
  command -v $t >/dev/null || { echo "check_guide: skipped: $t missing"; exit 77; }
done
d=$(th_tmpdir guide)
TN_PREFIX=$(th_prefix guide)
if [[ $(id -u) -ne 0 ]]; then
  TN_PORT_A=$(th_ports 2) || exit 1
  TN_PORT_B=$((TN_PORT_A + 1))
fi
. "$src/scripts/twonode.sh"
owner=
cleanup() {
  th_stop "$owner"
  twonode_down > /dev/null 2>&1
  th_eal_rm "$TN_PREFIX-a"
  th_eal_rm "$TN_PREFIX-b"
  th_rmdir "$d"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$d"/*.out "$d"/*.log; do [[ -f $f ]] && { echo "== $f"; tail -20 "$f"; }; done; exit 1; }
guide=$src/docs/guide.md
[[ -f $guide ]] || fail "no docs/guide.md"

# the blocks: files into $d/app, excerpts compared with their source
mkdir -p "$d/app"
python3 - "$src" "$guide" "$d/app" <<'PY' || fail "guide snippets"
import os, re, sys
src, guide, app = sys.argv[1:4]
text = open(guide).read()
bad = 0
files = excerpts = 0
for m in re.finditer(r'(?m)^(?:(<!-- (file|from): (\S+) -->)\n)?```(\w*)\n(.*?)^```$', text, re.S):
    kind, name, lang, body = m.group(2), m.group(3), m.group(4), m.group(5)
    line = text.count('\n', 0, m.start()) + 1
    if lang in ('sh', 'text'):
        continue
    if kind == 'file':
        open(os.path.join(app, name), 'w').write(body)
        files += 1
    elif kind == 'from':
        path = os.path.join(src, name)
        if not os.path.isfile(path) or body not in open(path).read():
            print(f'docs/guide.md:{line}: the {lang} block is not verbatim in {name}')
            bad += 1
        excerpts += 1
    else:
        print(f'docs/guide.md:{line}: a {lang or "plain"} block that nothing checks '
              '(mark it <!-- file: NAME --> or <!-- from: PATH -->)')
        bad += 1
# every repository path it names
for p in sorted(set(re.findall(r'(?<![\w/.$-])((?:client-lib|docs|k8s|scripts|tests|config|packaging|perf|dataplane)/[A-Za-z0-9_./-]*[A-Za-z0-9_])', text))):
    if not os.path.exists(os.path.join(src, p)):
        print(f'docs/guide.md names {p}, which does not exist')
        bad += 1
for need in ('hello.c', 'Makefile', 'meson.build'):
    if not os.path.exists(os.path.join(app, need)):
        print(f'docs/guide.md has no <!-- file: {need} --> block')
        bad += 1
print(f'check_guide: {files} files, {excerpts} verbatim excerpts')
sys.exit(1 if bad else 0)
PY

# libroshm as `meson install` puts it, found through its pkg-config file
meson install -C "$build" --no-rebuild --destdir "$d/root" > "$d/install.log" 2>&1 || fail "meson install"
pc=$(find "$d/root" -name libroshm.pc | head -1)
[[ -n $pc ]] || fail "libroshm.pc not installed"
export PKG_CONFIG_SYSROOT_DIR=$d/root PKG_CONFIG_PATH=${pc%/*}
ver=$(sed -n "s/^  version : '\(.*\)',$/\1/p" "$src/meson.build")
[[ $(pkg-config --modversion libroshm) == "$ver" ]] || fail "pkg-config --modversion libroshm: not $ver"
inc=$(pkg-config --cflags-only-I libroshm | sed 's/^-I//; s/ *$//')
[[ -f $inc/roshm.h && -f $inc/roshm/abi.h ]] || fail "pkg-config --cflags: no roshm.h under '$inc'"
[[ $(pkg-config --libs libroshm) == *-lroshm* ]] || fail "pkg-config --libs: no -lroshm"
libdir=$(pkg-config --libs-only-L libroshm | sed 's/^-L//; s/ *$//')

mkdir -p "$d/app-meson"
cp "$d/app/hello.c" "$d/app/meson.build" "$d/app-meson/"
if [[ $san != none ]]; then
  (cd "$d/app" && make hello.o) > "$d/make.log" 2>&1 || fail "make hello.o (the guide's Makefile)"
  ! grep -qi warning "$d/make.log" || fail "warnings: $(cat "$d/make.log")"
  echo "check_guide: sanitizer build: compiled, not linked or run; 1 passed, 0 failed"
  exit 0
fi
(cd "$d/app" && make) > "$d/make.log" 2>&1 || fail "make (the guide's Makefile)"
! grep -qi warning "$d/make.log" || fail "warnings: $(cat "$d/make.log")"
(meson setup "$d/app-meson/b" "$d/app-meson" && ninja -C "$d/app-meson/b") > "$d/meson.log" 2>&1 ||
  fail "meson (the guide's meson.build)"
! grep -qi "warning:" "$d/meson.log" || fail "warnings: $(grep -i warning: "$d/meson.log")"

# the two pods on two nodes
twonode_up "$build" "$d" || fail "roshmd did not start"
export LD_LIBRARY_PATH=$libdir
ROSHM_SOCK=$SOCK_A bg_a "$d/app/hello" owner > "$d/owner.out" 2>&1
owner=$BG_PID
ROSHM_SOCK=$SOCK_B in_b "$d/app-meson/b/hello" writer > "$d/writer.out" 2>&1 || fail "hello writer"
wait "$owner" || fail "hello owner"
owner=
cat "$d/writer.out" "$d/owner.out" | sed 's/^/    /'
# what the guide shows, numbers aside
shown=$(awk '/^writer: wrote "hello from pid/,/^owner: "hello from pid/' "$guide" | sed 's/[0-9]\+/N/g')
got=$(cat "$d/writer.out" "$d/owner.out" | sed 's/[0-9]\+/N/g')
[[ -n $shown && "$shown" == "$got" ]] || fail "the guide shows '$shown', hello printed '$got'"
twonode_down || fail "a roshmd did not stop cleanly"
echo "check_guide: installed libroshm builds the guide's program through pkg-config (make, meson); it ran on two nodes; 1 passed, 0 failed"
