#!/usr/bin/env bash
# ch3:rdma over a real verbs device (Soft-RoCE VM, or natively if present).
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
P=$(mpich_prefix rdma) || { echo "1..1"; ok 1 "ch3:rdma is built"; exit 1; }
W=$(mktemp -d /tmp/ch3rdma-verbs.XXXXXX); trap 'rm -rf "$W"' EXIT
build_progs "$P" "$W" || { echo "Bail out! cannot compile the MPI test programs"; exit 1; }
"$TOP/test/softroce/run-vm" --nodes 2 --timeout 1500 -- "$TOP/test/mpi/verbs-guest.sh" "$P" "$W"
