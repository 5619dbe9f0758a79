#!/usr/bin/env bash
# ch3:rdma over a real verbs device (Soft-RoCE VM, or natively if present).
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
mpi_setup
"$TOP/test/softroce/run-vm" --nodes 2 --timeout 1800 -- "$TOP/test/mpi/verbs-guest.sh" "$P" "$W"
