#!/bin/bash
# Prepare the Soft-RoCE VM once: host packages, Debian kernel, module tree, initramfs.
# Prints the cache directory (<cache>/softroce/<abi>) on stdout. Cached by a stamp file.
set -euo pipefail
. "$(dirname "$0")/common.sh"

ensure_pkgs vm
abi=$(kernel_abi)
dir=$SOFTROCE_CACHE/$abi
# The stamp covers the inputs of the initramfs, so editing them triggers a rebuild.
stamp_want="$abi $(cat "$SOFTROCE_DIR/prepare.sh" "$SOFTROCE_DIR/initramfs-init" | sha256sum | cut -c1-16)"
if [[ -f $dir/stamp && $(<"$dir/stamp") == "$stamp_want" ]]; then
    echo "$dir"
    exit 0
fi
mkdir -p "$dir"
cd "$dir"

# Kernel: exactly one package, the one linux-image-amd64 depends on.
pkg=linux-image-$abi
if [[ ! -f root/boot/vmlinuz-$abi ]]; then
    echo "prepare: downloading $pkg" >&2
    rm -f ./"$pkg"_*.deb
    apt-get download -q "$pkg" >&2 || die "apt-get download $pkg failed"
    rm -rf root
    dpkg -x ./"$pkg"_*.deb root
    rm -f ./"$pkg"_*.deb
fi
depmod -b root "$abi"

# Initramfs: static busybox, the modules needed to mount the host over 9p, and /init.
echo "prepare: building initramfs for $abi" >&2
rm -rf initramfs
mkdir -p initramfs/bin initramfs/mods
cp /bin/busybox initramfs/bin/busybox
cp "$SOFTROCE_DIR/initramfs-init" initramfs/init
modprobe -d root -S "$abi" --show-depends -a virtio_pci 9pnet_virtio 9p overlay \
    | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' >modules.list
: >initramfs/mods/order
while read -r ko; do
    name=$(basename "$ko")
    case $ko in
        *.ko) cp "$ko" initramfs/mods/ ;;
        *.ko.xz) name=${name%.xz}; xz -dc "$ko" >initramfs/mods/"$name" ;;
        *) die "unsupported module format: $ko" ;;
    esac
    echo "$name" >>initramfs/mods/order
done <modules.list
[[ -s initramfs/mods/order ]] || die "no modules resolved for the initramfs"
(cd initramfs && find . | busybox cpio -o -H newc 2>/dev/null) | gzip -1 >initramfs.cpio.gz.new
mv initramfs.cpio.gz.new initramfs.cpio.gz
rm -rf initramfs
ln -sf "root/boot/vmlinuz-$abi" vmlinuz
echo "$stamp_want" >stamp
echo "$dir"
