#!/usr/bin/env bash
# Draw every sweep roshm-perf wrote into DIR (NAME.csv + NAME.gp) as
# DIR/NAME.png with gnuplot. Without gnuplot it says so and succeeds: the
# CSV and JSON files are the results, the plots only show them.
#   plot.sh DIR
set -uo pipefail
dir=${1:?usage: plot.sh DIR}
shopt -s nullglob
gps=("$dir"/*.gp)
if (( ${#gps[@]} == 0 )); then
  echo "plot: no sweeps in $dir"
  exit 0
fi
if ! command -v gnuplot >/dev/null; then
  echo "plot: gnuplot not found (Debian package gnuplot-nox; make deps installs it):" \
       "no PNG drawn, the sweeps are in $dir/*.csv and *.json"
  exit 0
fi
n=0 bad=0
for gp in "${gps[@]}"; do
  name=$(basename "$gp" .gp)
  if (cd "$dir" && gnuplot "$name.gp" 2> "$name.gnuplot.log") && [[ -s $dir/$name.png ]]; then
    n=$((n + 1))
    rm -f "$dir/$name.gnuplot.log"
  else
    echo "plot: gnuplot could not draw $name.png (see $dir/$name.gnuplot.log)"
    bad=$((bad + 1))
  fi
done
if (( bad )); then echo "plot: $n plots in $dir/*.png, $bad failed"; else echo "plot: $n plots in $dir/*.png"; fi
exit 0
