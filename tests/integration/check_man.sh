#!/usr/bin/env bash
# The man pages: every page renders without a groff warning; every function
# roshm.h declares has a section 3 page (its own, or a .so link to its
# family's) whose NAME and SYNOPSIS name it, and no page is left of a
# function that is gone; every roshm page reference resolves; meson installs
# every page, and man finds each function's page (the .so links followed)
# without a warning; roshmctl.8 names every roshmctl command.
#   check_man.sh SRC [BUILD]
set -u
src=$1 build=${2:-}
man=$src/docs/man
. "$src/tests/lib/cleanup.sh"
command -v groff >/dev/null || { echo "check_man: skipped: groff missing"; exit 77; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
render() { LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$1" 2>&1; }

n=0
for f in "$man"/*.[0-9]; do
  n=$((n + 1))
  if grep -q '^\.so ' "$f"; then
    # a link: one line, naming a page of this directory
    [[ $(wc -l < "$f") == 1 ]] || fail "$f: a .so page has more than the .so line"
    t=$(sed -n 's|^\.so man\([0-9]\)/\(.*\)$|\2|p' "$f")
    [[ -n $t && -f $man/$t ]] || fail "$f: .so target '$(cat "$f")' is not a page here"
    if [[ -n $t && -f $man/$t ]] && grep -q '^\.so ' "$man/$t"; then fail "$f: .so to a .so page"; fi
    continue
  fi
  out=$(render "$f")
  [[ -z "$out" ]] || fail "$f: $out"
  for s in NAME SYNOPSIS DESCRIPTION; do
    grep -q "^\.SH $s\$" "$f" || fail "$f: no $s section"
  done
  # every reference to a roshm page names one that exists
  for ref in $(sed -n 's/^\.BR \(\(lib\)\{0,1\}roshm[a-z_-]*\) (\([0-9]\)).*/\1.\3/p' "$f"); do
    [[ -f $man/$ref ]] || fail "$f: refers to $ref, which has no page"
  done
done

# the functions of roshm.h: file-scope declarations and inline definitions
# (roshm__* are the library's own)
fns=$(grep -E '^[a-z][^(;=]*[ *]roshm_[a-z0-9_]+\(' "$src/client-lib/include/roshm.h" |
      sed -E 's/^[^(]*[ *](roshm_[a-z0-9_]+)\(.*/\1/' | grep -v '^roshm__' | sort -u)
nf=$(wc -w <<< "$fns")
(( nf >= 30 )) || fail "found only $nf functions in roshm.h: the extraction is broken"
for fn in $fns; do
  p=$man/$fn.3
  [[ -f $p ]] || { fail "$fn (roshm.h) has no man page docs/man/$fn.3"; continue; }
  if grep -q '^\.so ' "$p"; then
    p=$man/$(sed -n 's|^\.so man3/||p' "$p")
  fi
  [[ -f $p ]] || continue
  # NAME: "a, b \- what"; SYNOPSIS: the prototype
  sed -n '/^\.SH NAME/,/^\.SH/p' "$p" | grep -qE "(^|[ ,])$fn(,| \\\\-)" ||
    fail "$(basename "$p"): NAME does not name $fn"
  sed -n '/^\.SH SYNOPSIS/,/^\.SH/p' "$p" | grep -q "[ *]$fn(" ||
    fail "$(basename "$p"): SYNOPSIS has no prototype of $fn"
  grep -q '^\.SH RETURN VALUE$' "$p" || fail "$(basename "$p"): no RETURN VALUE section"
  grep -q '^\.SH SEE ALSO$' "$p" || fail "$(basename "$p"): no SEE ALSO section"
done
for p in "$man"/roshm_*.3; do
  fn=$(basename "$p" .3)
  grep -qx "$fn" <<< "$fns" || fail "$(basename "$p"): no function $fn in roshm.h"
done

for c in status clients regions peers stats drain; do
  grep -q "^\.B $c\$\|^\.BR $c " "$man/roshmctl.8" || fail "roshmctl.8 lacks $c"
done
(( n >= 4 )) || fail "only $n man pages"

# installed: every page, where man finds it
if [[ -n $build ]]; then
  d=$(th_tmpdir man)
  trap 'th_rmdir "$d"' EXIT
  if ! meson install -C "$build" --no-rebuild --tags man --destdir "$d/root" > "$d/log" 2>&1; then
    fail "meson install --tags man: $(tail -3 "$d/log")"
  else
    mandir=$(find "$d/root" -type d -name man3 -printf '%h\n' | head -1)
    for f in "$man"/*.[0-9]; do
      b=$(basename "$f")
      [[ -f $mandir/man${b##*.}/$b ]] || fail "$b is not installed (docs/man/meson.build)"
    done
    if command -v man >/dev/null; then
      for fn in $fns; do
        out=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -M "$mandir" 3 "$fn" 2>&1 > "$d/page")
        [[ -z $out ]] || fail "man 3 $fn: $out"
        grep -q "$fn" "$d/page" || fail "man 3 $fn: the installed page does not show $fn"
      done
    fi
  fi
fi
if (( fails )); then
  echo "check_man: 0 passed, 1 failed ($fails problems)"
  exit 1
fi
echo "check_man: $n pages, $nf functions of roshm.h each with its page; 1 passed, 0 failed"
