#!/usr/bin/env bash
# install-deps.sh GROUP... -- install the Debian packages a job needs when
# missing (as root), or print the exact apt-get line and fail.
#   build: MPICH with the channel   vm: Soft-RoCE test bed   npb: NAS + plots
#   peers: Debian's Open MPI and MPICH (ch4:ucx), compared against
set -euo pipefail

pkgs_build="gcc g++ make autoconf automake libtool perl gfortran xz-utils dpkg-dev patch libibverbs-dev"
pkgs_vm="qemu-system-x86 busybox-static kmod rdma-core ibverbs-providers ibverbs-utils perftest iproute2 openssh-server openssh-client slurm-wlm munge"
pkgs_npb="gfortran gnuplot-nox"
pkgs_peers="openmpi-bin libopenmpi-dev mpich libmpich-dev"  # Debian's MPIs, for comparisons

want=""
for g in "$@"; do
    v="pkgs_$g"
    [ -n "${!v:-}" ] || { echo "install-deps: unknown group '$g' (build, vm, npb, peers)" >&2; exit 2; }
    want="$want ${!v}"
done
missing=""
for p in $want; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages; as root run: apt-get install -y$missing" >&2
    exit 1
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends $missing >&2
