#!/usr/bin/env bash
# The secrets of a roshm deployment, written where the kustomizations
# generate their Secrets from. Nothing usable ships in the repository: until
# this has run, `kubectl kustomize` / `kubectl apply -k` stops with
# "secrets/cluster.secret: no such file".
#   scripts/k8s-secrets.sh [K8S_DIR] [TENANT...]
# K8S_DIR defaults to this checkout's k8s/, the tenants to "default".
# Writes (mode 0600, under secrets/ directories that .gitignore keeps out):
#   overlays/*/secrets/cluster.secret  32 random bytes, base64: every roshmd
#                                      proves it to its peers and signs the
#                                      registry's records with it
#   overlays/*/secrets/tenants.conf    each tenant with a random token
#   examples/app/secrets/token         the first tenant's token, for the
#                                      example application's Secret
# Every overlay gets the same files (deploy one). Files that exist are kept:
# running it again never changes a deployed cluster's secrets; delete the
# secrets/ directories first to make new ones (then restart every roshmd).
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
src=""
for o in "$k8s"/overlays/*/; do
  [[ -f $o/secrets/cluster.secret && -f $o/secrets/tenants.conf ]] && { src=$o/secrets; break; }
done
if [[ -z $src ]]; then
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
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
for o in "$k8s"/overlays/*/; do
  mkdir -p "$o/secrets"
  for f in cluster.secret tenants.conf; do
    [[ -f $o/secrets/$f ]] || cp "$src/$f" "$o/secrets/$f"
  done
  echo "k8s-secrets: $o/secrets"
done
app=$k8s/examples/app/secrets
if [[ -d $k8s/examples/app && ! -f $app/token ]]; then
  mkdir -p "$app"
  first=$(sed -n 's/.*name = "\([^"]*\)"; token = "\([^"]*\)".*/\1 \2/p' "$src/tenants.conf" | head -1)
  printf '%s' "${first#* }" > "$app/token"
  echo "k8s-secrets: $app/token (tenant ${first%% *})"
fi
