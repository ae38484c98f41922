#!/usr/bin/env bash
# The container recipe without a container engine: run the Dockerfile's build
# step (scripts/image-build.sh build) into a scratch root, check what it
# installs, that the binaries start from there, and that every shared library
# they load comes from the runtime stage's packages (or what those pull in,
# or Debian's required set that debian:12-slim has).
#   check_image.sh SRC
set -u
src=$1
fail() { echo "FAIL: $*"; exit 1; }
. "$src/tests/lib/cleanup.sh"
grep -q 'image-build.sh build /out' "$src/Dockerfile" || fail "Dockerfile does not run image-build.sh build"
grep -q 'image-build.sh runtime' "$src/Dockerfile" || fail "Dockerfile does not run image-build.sh runtime"
d=$(th_tmpdir image)
trap 'th_rmdir "$d"' EXIT
"$src/scripts/image-build.sh" build "$d/root" > "$d/log" 2>&1 || fail "image-build.sh build: $(tail -5 "$d/log")"
r=$d/root
lib=$(ls -d "$r"/usr/lib/*-linux-gnu 2>/dev/null | head -1)
for f in usr/sbin/roshmd usr/sbin/roshmctl usr/bin/roshm-perf usr/bin/demo-owner usr/bin/demo-writer \
         usr/bin/txn-transfer usr/include/roshm.h \
         usr/share/man/man8/roshmd.8 usr/share/man/man8/roshmctl.8 usr/share/man/man3/libroshm.3 \
         usr/share/man/man3/roshm_open.3 usr/share/man/man3/roshm_prep_read.3 \
         usr/share/man/man1/roshm-perf.1 usr/share/bash-completion/completions/roshmctl \
         usr/lib/systemd/system/roshmd.service \
         etc/roshm/roshmd.conf.sample; do
  [[ -e $r/$f ]] || fail "$f not installed"
done
ls "$lib"/libroshm.so* >/dev/null 2>&1 || fail "libroshm.so not installed"
ls "$lib"/pkgconfig/libroshm.pc >/dev/null 2>&1 || fail "libroshm.pc not installed"
LD_LIBRARY_PATH=$lib "$r/usr/sbin/roshmd" --version > "$d/v" 2>&1 || fail "roshmd --version: $(cat "$d/v")"
LD_LIBRARY_PATH=$lib "$r/usr/sbin/roshmd" --check-config "$r/etc/roshm/roshmd.conf.sample" > "$d/v" 2>&1 ||
  fail "roshmd --check-config on the sample: $(cat "$d/v")"
# shellcheck disable=SC2046
allowed=$( (apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
             --no-replaces --no-enhances $("$src/scripts/image-build.sh" runtime-list) | grep -v '^ ';
           dpkg-query -W -f='${Package} ${Priority}\n' | awk '$2 == "required" { print $1 }') |
           sed 's/:.*//' | sort -u)
n=0
for bin in "$r/usr/sbin/roshmd" "$r/usr/sbin/roshmctl" "$r/usr/bin/roshm-perf"; do
  while read -r so; do
    [[ $so == "$r"/* ]] && continue
    pkg=$(dpkg -S "$(readlink -f "$so")" 2>/dev/null | head -1 | cut -d: -f1)
    [[ -z $pkg ]] && pkg=$(dpkg -S "$so" 2>/dev/null | head -1 | cut -d: -f1)
    [[ -n $pkg ]] || fail "$(basename "$bin") needs $so, which no package owns"
    grep -qx "$pkg" <<< "$allowed" || fail "$(basename "$bin") needs $so from $pkg, not in the runtime stage"
    n=$((n + 1))
  done < <(LD_LIBRARY_PATH=$lib ldd "$bin" | awk '/=> \// { print $3 }')
done
echo "check_image: installed tree OK, $n shared libraries all from the runtime packages; 1 passed, 0 failed"
