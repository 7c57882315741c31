#!/bin/bash
# mkvm.sh -- build a tiny QEMU guest that runs Linux soft-RoCE (rdma_rxe).
#
# Usage: lab/rxe/mkvm.sh WORKDIR
#
# Produces WORKDIR/vmlinuz, WORKDIR/initrd.gz, WORKDIR/share/ (a writable 9p
# share for guest scripts and logs) and WORKDIR/kver (the guest kernel version).
#
# The guest kernel is Debian's current linux-image-*-amd64 package, downloaded
# with `apt-get download` and extracted (never installed on the host). The
# initramfs is busybox; it loads virtio_net, 9p, rdma_rxe and sch_netem, mounts
# the host's root filesystem read-only over virtio-9p and chroots into it, so
# the guest runs the host's own ibv_rc_pingpong / perftest / rdma / tc binaries.
#
# Needs root (apt-get). Installs from Debian: qemu-system-x86 ibverbs-utils
# ibverbs-providers rdma-core perftest busybox-static kmod cpio iproute2
# tshark (for the capture summaries in record.sh).
# Re-running is cheap: the kernel is only re-downloaded if WORKDIR/kver is
# missing or FORCE=1 is set.
set -euo pipefail

usage() { echo "usage: $0 WORKDIR" >&2; exit 2; }
[ $# -eq 1 ] || usage
W=$1
[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (apt-get)" >&2; exit 1; }

mkdir -p "$W" "$W/share"
W=$(cd "$W" && pwd)
cd "$W"

export DEBIAN_FRONTEND=noninteractive
PKGS="qemu-system-x86 ibverbs-utils ibverbs-providers rdma-core perftest busybox-static kmod cpio iproute2 tshark"
missing=$(for p in $PKGS; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"; done)
if [ -n "$missing" ]; then
  timeout 600 apt-get update -qq
  # tshark asks a debconf question about non-root capture; the default answer is fine.
  timeout 900 apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ "${FORCE:-0}" = 1 ] || [ ! -s kver ] || [ ! -s vmlinuz ]; then
  timeout 600 apt-get update -qq
  # linux-image-amd64 is a metapackage; its first Depends names the real kernel package.
  KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$KPKG" ] || { echo "$0: cannot find the kernel package behind linux-image-amd64" >&2; exit 1; }
  KVER=${KPKG#linux-image-}
  rm -rf kroot ./*.deb
  timeout 900 apt-get download "$KPKG"
  dpkg-deb -x "$KPKG"_*.deb kroot
  depmod -b "$W/kroot" "$KVER"
  cp "kroot/boot/vmlinuz-$KVER" vmlinuz
  echo "$KVER" > kver
fi
KVER=$(cat kver)

rm -rf initramfs
mkdir -p initramfs/{bin,mods,proc,sys,dev,host}
cp /bin/busybox initramfs/bin/
: > initramfs/mods/order
for m in virtio_net 9pnet_virtio 9p virtio_pci crc32_generic rdma_rxe sch_netem; do
  modprobe -d "$W/kroot" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}'
done | awk '!seen[$0]++' | while read -r f; do
  cp "$f" initramfs/mods/
  basename "$f" >> initramfs/mods/order
done

cat > initramfs/init <<'EOI'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do insmod /mods/$m || echo "insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro hostroot /host
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mount -t tmpfs tmp /host/tmp; mount -t tmpfs run /host/run; mkdir -p /host/tmp/share /host/run/lock
mount -t 9p -o trans=virtio,version=9p2000.L share /host/tmp/share
S=$(sed -n 's/.*vmscript=\([^ ]*\).*/\1/p' /proc/cmdline)
chroot /host /bin/bash /tmp/share/$S; echo "vm script exit=$?"
poweroff -f
EOI
chmod +x initramfs/init
(cd initramfs && find . | cpio -o -H newc 2>/dev/null | gzip -1 > ../initrd.gz)
echo "built $W/vmlinuz ($KVER) and $W/initrd.gz ($(wc -l < initramfs/mods/order) modules)"
