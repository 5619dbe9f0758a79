#!/usr/bin/env bash
# MPICH's own test suite (init, errhan) across two VMs (testsuite-vm.sh --vms): the
# ranks alternate between two kernels, so neighbours talk verbs over the link.
. "$(dirname "$0")/../lib.sh"
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
TESTSUITE_VM_TIMEOUT=${TESTSUITE_VM_TIMEOUT:-1800} "$TOP/test/mpi/testsuite-vm.sh" --vms "${TESTSUITE_VMS_DIRS:-init,errhan}" "$out" 2>&1 | tail -5 | diag
testsuite_tap "$out" rdma-vms
