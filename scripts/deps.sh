#!/usr/bin/env bash
# Install the Debian packages named on the command line that are missing.
# As root: apt-get update + install. Otherwise: print the command to run.
set -euo pipefail
missing=()
for p in "$@"; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$st" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -eq 0 ]]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "deps: missing packages: ${missing[*]}" >&2
  echo "deps: run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
