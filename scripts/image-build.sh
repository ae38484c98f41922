#!/usr/bin/env bash
# The container image's build steps (Dockerfile), also run by `make test`
# (tests/image/check_image.sh) so that the recipe is tested without a
# container engine.
#   image-build.sh build DESTDIR   install build deps, build, install into DESTDIR
#   image-build.sh runtime         install the runtime packages (runtime stage)
#   image-build.sh runtime-list    print them
set -euo pipefail
BUILD_PKGS="meson ninja-build gcc pkg-config libdpdk-dev libconfig-dev libjansson-dev libssl-dev
libibverbs-dev librdmacm-dev libcurl4-openssl-dev"
# What roshmd, roshmctl and libroshm link against at run time, plus the
# rdma-core providers (libibverbs loads them) and iproute2's rdma tool.
RUNTIME_PKGS="librte-eal23 librte-kvargs23 librte-ring23 librte-telemetry23 libconfig9 libjansson4 libssl3 libcurl4 libibverbs1 librdmacm1 ibverbs-providers
rdma-core libnuma1 libatomic1"
here=$(cd "$(dirname "$0")" && pwd)
case "${1:-}" in
  build)
    dest=${2:?DESTDIR}
    # shellcheck disable=SC2086
    "$here/deps.sh" $BUILD_PKGS
    b=$(mktemp -d)
    meson setup "$b" "$here/.." --prefix=/usr --buildtype=release -Dtests=false >/dev/null
    ninja -C "$b" >/dev/null
    DESTDIR=$dest meson install -C "$b" --no-rebuild >/dev/null
    install -D -m 0644 "$here/../config/roshmd.conf" "$dest/etc/roshm/roshmd.conf.sample"
    rm -rf "$b"
    echo "image-build: installed into $dest"
    ;;
  runtime)
    # shellcheck disable=SC2086
    "$here/deps.sh" $RUNTIME_PKGS
    ;;
  runtime-list)
    echo $RUNTIME_PKGS
    ;;
  *)
    echo "usage: image-build.sh build DESTDIR | runtime | runtime-list" >&2
    exit 2
    ;;
esac
