#!/bin/bash
# vm.sh -- boot one rxe guest (built by mkvm.sh) and run a script in it.
#
# Usage: lab/rxe/vm.sh WORKDIR SCRIPT [extra qemu args...]
#
# SCRIPT is a file name inside WORKDIR/share (the guest sees it as
# /tmp/share/SCRIPT and runs it with bash, chrooted into the host's read-only
# root filesystem). The guest powers off when SCRIPT ends. Network devices are
# passed as extra qemu args (see record.sh); without them the guest has none.
#
# Acceleration: TCG only (`-accel tcg -cpu max`). KVM is not usable on the lab
# machines this was written on (`-cpu host` aborts, plain KVM hangs).
# The caller bounds the run with `timeout`; this script exec()s QEMU so that
# the timeout's signal reaches QEMU itself.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 WORKDIR SCRIPT [extra qemu args...]" >&2; exit 2; fi
W=$1; S=$2; shift 2
for f in "$W/vmlinuz" "$W/initrd.gz" "$W/share/$S"; do
  [ -e "$f" ] || { echo "$0: missing $f (run mkvm.sh $W first?)" >&2; exit 1; }
done
exec qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m "${VM_MEM:-1024}" -smp 1 -nographic -no-reboot \
  -nodefaults -serial stdio \
  -kernel "$W/vmlinuz" -initrd "$W/initrd.gz" -append "console=ttyS0 quiet panic=-1 vmscript=$S" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$W/share",mount_tag=share,security_model=none "$@"
