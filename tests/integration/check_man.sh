#!/usr/bin/env bash
# The man pages render without a groff warning, and name every roshmctl command.
set -u
src=$1
command -v groff >/dev/null || { echo "check_man: skipped: groff missing"; exit 77; }
n=0
for f in "$src"/docs/man/*.[0-9]; do
  n=$((n + 1))
  out=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$f" 2>&1)
  [[ -z "$out" ]] || { echo "FAIL: $f: $out"; exit 1; }
done
for c in status clients regions peers stats drain; do
  grep -q "^\.B $c\$\|^\.BR $c " "$src/docs/man/roshmctl.8" || { echo "FAIL: roshmctl.8 lacks $c"; exit 1; }
done
(( n >= 4 )) || { echo "FAIL: only $n man pages"; exit 1; }
echo "check_man: $n pages, 1 passed, 0 failed"
