#!/bin/sh
# Makes the private sysfs tree the emulated EFA device is found in.
#   sysfs.sh DIR [NDEV]    (NDEV devices, default 4; then SYSFS_PATH=DIR)
# What the efa provider reads there: <ibdev_path>/device (a directory named
# like a PCI address), its driver link's name, and
# class/infiniband_verbs/abi_version.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 DIR [NDEV]" >&2; exit 2; }
dir=$1 n=${2:-4}
mkdir -p "$dir/class/infiniband" "$dir/class/infiniband_verbs" "$dir/bus/pci/drivers/efa"
echo 6 >"$dir/class/infiniband_verbs/abi_version"
i=0
while [ "$i" -lt "$n" ]; do
  pci=$(printf '0000:%02x:00.0' $((16 + i)))
  dev=$dir/devices/pci0000:00/$pci
  mkdir -p "$dev" "$dir/class/infiniband/rdmap${i}"
  ln -sfn "$dev" "$dir/class/infiniband/rdmap${i}/device"
  ln -sfn "$dir/bus/pci/drivers/efa" "$dev/driver"
  mkdir -p "$dir/class/infiniband_verbs/uverbs$i"
  i=$((i + 1))
done
