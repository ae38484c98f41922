#!/usr/bin/env bash
# Boot one Soft-RoCE test VM (qemu TCG: /dev/kvm needs a special guest
# kernel here) that runs SCRIPT ARG from the host root in a chroot and powers
# off. Its eth0 is a socket netdev on 127.0.0.1:PORT (listen or connect), so
# two VMs form a private link.
# SHARED (optional) is a host directory both VMs see read-write at /run/shared.
#   vm.sh KIT LOG SCRIPT ARG listen|connect PORT MAC [SHARED]
set -euo pipefail
KIT=$1 LOG=$2 SCRIPT=$3 ARG=$4 MODE=$5 PORT=$6 MAC=$7 SHARED=${8:-}
extra=()
[[ -n "$SHARED" ]] && extra=(-virtfs "local,path=$SHARED,mount_tag=shared,security_model=none")
exec qemu-system-x86_64 -accel tcg -cpu max -m 1024 -smp 2 -display none -monitor none -no-reboot \
  -kernel "$KIT/vmlinuz" -initrd "$KIT/initrd.img" \
  -append "console=ttyS0 quiet panic=-1 roshm.script=$SCRIPT roshm.arg=$ARG" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
  -netdev "socket,id=n0,$MODE=127.0.0.1:$PORT" -device "virtio-net-pci,netdev=n0,mac=$MAC" \
  "${extra[@]}" -serial "file:$LOG"
