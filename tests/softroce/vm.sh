#!/usr/bin/env bash
# Boot one Soft-RoCE test VM (qemu TCG: /dev/kvm needs a special guest
# kernel here) that runs SCRIPT ARG from the host root in a chroot and powers
# off. Its eth0 is a UDP socket netdev on 127.0.0.1 (VM1, "listen", on PORT,
# VM2, "connect", on PORT+1; VM_NET=tcp: a TCP stream on PORT), so two VMs
# form a private link.
# SHARED (optional) is a host directory both VMs see read-write at /run/shared.
#   vm.sh KIT LOG SCRIPT ARG listen|connect PORT MAC [SHARED]
set -euo pipefail
KIT=$1 LOG=$2 SCRIPT=$3 ARG=$4 MODE=$5 PORT=$6 MAC=$7 SHARED=${8:-}
extra=()
[[ -n "$SHARED" ]] && extra=(-virtfs "local,path=$SHARED,mount_tag=shared,security_model=none")
net="socket,id=n0,$MODE=127.0.0.1:$PORT"
if [[ "${VM_NET:-udp}" = udp ]]; then
  # A UDP socket each (VM1, "listen", on PORT; VM2 on PORT+1), sending to
  # the other. Not a TCP stream (VM_NET=tcp): on it every RC ping-pong (a
  # small reply right after the ACK of the request it answers) took ~22 ms,
  # UC and READ did not, most likely Nagle holding the reply until the host
  # acknowledged the ACK: ib_write_lat read ~22 ms there, 0.3-1.7 ms on UDP.
  me=$PORT peer=$((PORT + 1))
  [[ $MODE = connect ]] && me=$((PORT + 1)) peer=$PORT
  net="socket,id=n0,udp=127.0.0.1:$peer,localaddr=127.0.0.1:$me"
fi
# idle=halt: -cpu max offers MONITOR/MWAIT, and a guest that idles in MWAIT
# is not woken by the other vCPU under TCG, only by its next timer tick
# (the waker likely sees it polling in MWAIT and sends no IPI): a wake-up
# across vCPUs took 4-8 ms (an eventfd ping-pong between two pinned threads:
# 8 ms median, 60 us with idle=halt), which every blocking wait paid
# (roshmd's adaptive idle, completion channels, perftest -e).
exec qemu-system-x86_64 -accel tcg -cpu max -m 1024 -smp 2 -display none -monitor none -no-reboot \
  -kernel "$KIT/vmlinuz" -initrd "$KIT/initrd.img" \
  -append "console=ttyS0 quiet panic=-1 idle=halt roshm.script=$SCRIPT roshm.arg=$ARG" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
  -netdev "$net" -device "virtio-net-pci,netdev=n0,mac=$MAC" \
  "${extra[@]}" -serial "file:$LOG"
