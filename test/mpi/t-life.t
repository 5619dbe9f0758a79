#!/usr/bin/env bash
# Connection lifecycle over verbs between two node names in the Soft-RoCE
# test bed: busy peers, the closing window, staggered finalize, a killed
# rank, a receiver that cannot pin (test/mpi/life-guest.sh).  About 4 min.
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
mpi_setup
"$TOP/test/softroce/run-vm" --nodes 2 --timeout 1200 -- "$TOP/test/mpi/life-guest.sh" "$P" "$W"
