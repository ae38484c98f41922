#!/usr/bin/env bash
# The secrets of a roshm deployment, written where the kustomizations
# generate their Secrets from. Nothing usable ships in the repository: until
# this has run, `kubectl kustomize` / `kubectl apply -k` stops with
# "evalsymlink failure on '.../secrets/cluster.secret'".
#   scripts/k8s-secrets.sh [K8S_DIR] [TENANT...]
# K8S_DIR defaults to this checkout's k8s/, the tenants to "default".
# Writes (mode 0600, under secrets/ directories that .gitignore keeps out):
#   overlays/*/secrets/cluster.secret  32 random bytes, base64: every roshmd
#                                      proves it to its peers and signs the
#                                      registry's records with it
#   overlays/*/secrets/tenants.conf    each tenant with a random token
#   examples/app/secrets/token         the token of tenant "default" (else
#                                      of the first tenant), for the example
#                                      application's Secret
# Every overlay gets the same files (deploy one). Files that exist are kept:
# running it again never changes a deployed cluster's secrets or tokens. A
# tenant named on the command line that tenants.conf lacks is added to it,
# with a new token (apply the overlay again: roshmd restarts with it). To
# make new secrets, delete every overlays/*/secrets directory and
# examples/app/secrets, then run it again (then every roshmd restarts); an
# example token that no longer matches its tenant's is replaced, and said so.
set -euo pipefail
k8s=${1:-$(cd "$(dirname "$0")/../k8s" && pwd)}
shift || true
tenants=("$@")
(( ${#tenants[@]} )) || tenants=(default)
for t in "${tenants[@]}"; do
  [[ $t =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "k8s-secrets: bad tenant name '$t'" >&2; exit 2; }
done
command -v openssl >/dev/null || { echo "k8s-secrets: openssl is needed" >&2; exit 1; }
umask 077
# "NAME TOKEN" for each tenant of a tenants.conf written by this script
tenant_tokens() { sed -n 's/.*name = "\([^"]*\)"; token = "\([^"]*\)".*/\1 \2/p' "$1"; }
has_tenant() { tenant_tokens "$1" | awk -v t="$2" '$1 == t { f = 1 } END { exit !f }'; }
src=""
for o in "$k8s"/overlays/*/; do
  [[ -f $o/secrets/cluster.secret && -f $o/secrets/tenants.conf ]] && { src=$o/secrets; break; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -z $src ]]; then
  src=$tmp
  openssl rand -base64 32 > "$src/cluster.secret"
  {
    echo "# tenants and their tokens (scripts/k8s-secrets.sh); a pod attaches as a"
    echo "# tenant with ROSHM_TENANT and ROSHM_TOKEN"
    echo "tenants = ("
    sep=""
    for t in "${tenants[@]}"; do
      printf '%s  { name = "%s"; token = "%s"; }' "$sep" "$t" "$(openssl rand -hex 24)"
      sep=$',\n'
    done
    printf '\n);\n'
  } > "$src/tenants.conf"
  echo "k8s-secrets: new cluster secret and tokens for: ${tenants[*]}"
else
  echo "k8s-secrets: keeping the secrets in $src"
fi
# tenants asked for that the existing tenants.conf lacks: one new token each,
# the same in every overlay
declare -A newtok=()
for t in "${tenants[@]}"; do
  has_tenant "$src/tenants.conf" "$t" || newtok[$t]=$(openssl rand -hex 24)
done
mkdir "$tmp/ref"
cp "$src/cluster.secret" "$src/tenants.conf" "$tmp/ref/"
for o in "$k8s"/overlays/*/; do
  o=${o%/}
  mkdir -p "$o/secrets"
  for f in cluster.secret tenants.conf; do
    [[ -f $o/secrets/$f ]] || cp "$tmp/ref/$f" "$o/secrets/$f"
  done
  cmp -s "$o/secrets/cluster.secret" "$tmp/ref/cluster.secret" && cmp -s "$o/secrets/tenants.conf" "$tmp/ref/tenants.conf" ||
    echo "k8s-secrets: warning: $o/secrets differs from $src (the overlays should share one cluster's secrets)" >&2
  add=()
  for t in "${tenants[@]}"; do
    [[ -n ${newtok[$t]:-} ]] && ! has_tenant "$o/secrets/tenants.conf" "$t" && add+=("$t")
  done
  if (( ${#add[@]} )); then
    # new entries go first in the list, right after its opening line, each
    # followed by a comma (the list has at least one entry already)
    grep -q '^tenants = ($' "$o/secrets/tenants.conf" &&
      tenant_tokens "$o/secrets/tenants.conf" | grep -q . || {
      echo "k8s-secrets: cannot add ${add[*]} to $o/secrets/tenants.conf: it has no line 'tenants = (' followed by" \
           "tenants; add them by hand ({ name = \"T\"; token = \"\$(openssl rand -hex 24)\"; }) in every overlay" >&2
      exit 1
    }
    : > "$tmp/entries"
    for t in "${add[@]}"; do
      printf '  { name = "%s"; token = "%s"; },\n' "$t" "${newtok[$t]}" >> "$tmp/entries"
    done
    sed "/^tenants = (\$/r $tmp/entries" "$o/secrets/tenants.conf" > "$tmp/edited.conf"
    cat "$tmp/edited.conf" > "$o/secrets/tenants.conf"
    echo "k8s-secrets: added tenants ${add[*]} to $o/secrets/tenants.conf (apply the overlay again)"
  fi
  echo "k8s-secrets: $o/secrets"
done
# the example application's token: tenant "default"'s, else the first's
app=$k8s/examples/app/secrets
if [[ -d $k8s/examples/app ]]; then
  conf=$src/tenants.conf
  [[ $src == "$tmp" ]] && conf=$(ls "$k8s"/overlays/*/secrets/tenants.conf | head -1)
  want=$(tenant_tokens "$conf" | grep '^default ' || tenant_tokens "$conf" | head -1)
  mkdir -p "$app"
  if [[ ! -f $app/token ]]; then
    printf '%s' "${want#* }" > "$app/token"
    echo "k8s-secrets: $app/token (tenant ${want%% *})"
  elif [[ $(cat "$app/token") != "${want#* }" ]]; then
    printf '%s' "${want#* }" > "$app/token"
    echo "k8s-secrets: $app/token was not tenant ${want%% *}'s token in $conf (stale: the overlays' secrets" \
         "were made again?): replaced; apply k8s/examples/app again"
  fi
fi
