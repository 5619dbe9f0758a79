#!/usr/bin/env bash
# testsuite-vm.sh [--vms] [--env VAR=VAL]... DIRS [OUT] -- MPICH's test/mpi directories
# DIRS (comma list) on ch3:rdma in the Soft-RoCE test bed, results in OUT (default
# results/testsuite-vm-DATE) as testsuite.sh writes them; each --env setting goes to
# every test (e.g. --env MPIR_CVAR_CH3_RDMA_MAX_CONNS=2); TESTSUITE_VM_TIMEOUT (s, default
# 14400) and TESTSUITE_VM_MEM (MB per guest, default 2048) size the boot:
#   one VM:  verbs forced between the ranks of one kernel (summary-rdma-verbs.*);
#   --vms:   two VMs, each its own kernel and rxe0, Hydra over ssh with the ranks placed
#            round robin on node0 and node1, so neighbours talk verbs across the link and
#            ranks two apart shm inside a VM (summary-rdma-vms.*).
# The programs are built here first: compiling inside the emulated VM would take hours.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vms=0 envs=()
[ "${1:-}" = --vms ] && { vms=1; shift; }
while [ "${1:-}" = --env ] && [[ "${2:-}" == [A-Za-z_]*=* ]]; do envs+=(--env "$2"); shift 2; done
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: testsuite-vm.sh [--vms] [--env VAR=VAL]... DIRS [OUT]" >&2; exit 2; }
dirs=$1 out=${2:-$TOP/results/testsuite-vm-$(date +%Y%m%d-%H%M)}
mkdir -p "$out" && out=$(cd "$out" && pwd)
TESTSUITE_BUILD_ONLY=1 "$TOP/test/mpi/testsuite.sh" rdma "$dirs" "$out"
T=$(mpich_prefix rdma)/../build/test/mpi
if ((vms)); then
    printf 'node0\nnode1\n' > "$out/hosts"
    bed=(--nodes 2 --vms --env HYDRA_HOST_FILE="$out/hosts" --env TESTSUITE_TAG=rdma-vms
         --env MPITEST_TIMEOUT_MULTIPLIER="${MPITEST_TIMEOUT_MULTIPLIER:-6}")
else
    # one node: Hydra forks there, as on a single host (through the test
    # bed's ssh launcher it throttles concurrent spawns with a warning that
    # runtests counts as a failure: spawn/concurrent_spawns, spawn_rootargs)
    bed=(--env HYDRA_LAUNCHER_AUTOFORK=1 --env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs --env TESTSUITE_TAG=rdma-verbs
         --env MPITEST_TIMEOUT_MULTIPLIER="${MPITEST_TIMEOUT_MULTIPLIER:-4}")
fi
"$TOP/test/softroce/run-vm" --timeout "${TESTSUITE_VM_TIMEOUT:-14400}" --mem "${TESTSUITE_VM_MEM:-2048}" --rw "$out" --rw "$T" \
    "${bed[@]}" ${envs[@]+"${envs[@]}"} -- "$TOP/test/mpi/testsuite.sh" rdma "$dirs" "$out"
echo "results in $out"
