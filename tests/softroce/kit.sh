#!/usr/bin/env bash
# Build the Soft-RoCE VM kit: Debian's 6.1 kernel (apt-get download), its
# modules with dependencies resolved, and a busybox initramfs that loads
# virtio/9p/rxe modules, mounts the host root read-only over 9p and runs a
# script from it in a chroot.   kit.sh KITDIR
set -euo pipefail
KIT=${1:?kit dir}
mkdir -p "$KIT"
cd "$KIT"
if [[ ! -f vmlinuz ]]; then
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-6.1/ {print $2; exit}')
  [[ -n "$pkg" ]] || { echo "kit: no linux-image-6.1 package known to apt" >&2; exit 1; }
  rm -f ./*.deb
  apt-get download "$pkg" >/dev/null 2>&1 || { echo "kit: apt-get download $pkg failed" >&2; exit 1; }
  rm -rf root && dpkg-deb -x ./*.deb root
  kver=$(ls root/lib/modules)
  depmod -b root "$kver"
  cp root/boot/vmlinuz-* vmlinuz
  echo "$kver" > kver
fi
kver=$(cat kver)
moddir=root/lib/modules/$kver
# dependency closure, dependencies first
want="crc32_generic virtio_pci virtio_net 9pnet_virtio 9p rdma_rxe ib_uverbs rdma_ucm"
order=()
declare -A seen=()
visit() {
  local path=$1 dep
  [[ -n ${seen[$path]:-} ]] && return
  seen[$path]=1
  for dep in $(awk -v p="$path:" '$1 == p {for (i = 2; i <= NF; i++) print $i}' "$moddir/modules.dep"); do
    visit "$dep"
  done
  order+=("$path")
}
for m in $want; do
  path=$(awk -F: -v m="/$m.ko" 'index($1, m) && substr($1, length($1) - length(m) + 1) == m {print $1; exit}' "$moddir/modules.dep")
  if [[ -z "$path" ]]; then
    grep -q "/$m.ko" "$moddir/modules.builtin" && continue
    echo "kit: module $m not found" >&2; exit 1
  fi
  visit "$path"
done
rm -rf initramfs && mkdir -p initramfs/{bin,proc,sys,dev,mnt/root,modules}
cp /bin/busybox initramfs/bin/busybox
: > initramfs/modules.list
for p in "${order[@]}"; do
  cp "$moddir/$p" initramfs/modules/
  basename "$p" >> initramfs/modules.list
done
cat > initramfs/init <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.list); do insmod /modules/$m || echo "init: insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro hostroot /mnt/root || echo "init: 9p mount failed"
# writable places in the read-only host root (not /tmp: the caller's files
# may live there); scripts use /run for their own files
for d in run var/tmp; do mount -t tmpfs tmpfs /mnt/root/$d 2>/dev/null; done
# a writable directory shared by the VMs of one test (9p tag "shared"), if any
mkdir -p /mnt/root/run/shared
mount -t 9p -o trans=virtio,version=9p2000.L shared /mnt/root/run/shared 2>/dev/null
mount -o bind /proc /mnt/root/proc
mount -o bind /sys /mnt/root/sys
mount -o bind /dev /mnt/root/dev
script=$(sed -n 's/.*roshm.script=\([^ ]*\).*/\1/p' /proc/cmdline)
arg=$(sed -n 's/.*roshm.arg=\([^ ]*\).*/\1/p' /proc/cmdline)
echo "init: running $script $arg"
chroot /mnt/root /bin/bash "$script" "$arg"
echo "init: exit status $?"
poweroff -f
INIT
chmod +x initramfs/init
(cd initramfs && find . | cpio -o -H newc --quiet | gzip -1) > initrd.img
echo "kit: $KIT/vmlinuz ($kver), initrd with ${#order[@]} modules"
