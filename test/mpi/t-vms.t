#!/usr/bin/env bash
# ch3:rdma across two VMs (two kernels, one virtual Ethernet link, Soft-RoCE on each),
# launched by Hydra over ssh and through Slurm (run-vm --vms --slurm).
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
mpi_setup
"$TOP/test/softroce/run-vm" --nodes 2 --vms --slurm --timeout 1500 -- "$TOP/test/mpi/vms-guest.sh" "$P" "$W"
