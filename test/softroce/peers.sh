#!/bin/bash
# Peers over rxe0: 2-rank ping-pong (pingpong.c) with Debian's Open MPI (pml ob1/tcp and
# pml ucx) and Debian's MPICH (ch4:ucx) inside the Soft-RoCE VM. See peers.md.
#   peers.sh [run-vm options]   on the host: builds pingpong, boots the VM, prints a summary
#   peers.sh --guest DIR        inside the VM (called by the above)
set -euo pipefail
. "$(dirname "$0")/common.sh"
# UCX settings that make UCX 1.13 work on rxe (peers.md explains each one).
UCX_RXE=("UCX_TLS=rc,self" "UCX_NET_DEVICES=${CH3RDMA_DEVICE:-rxe0}:1" UCX_UD_VERBS_ETH_DGID_CHECK=n
         UCX_LOG_LEVEL=info)

if [[ ${1:-} != --guest ]]; then
    ensure_pkgs peers
    dir=$(mktemp -d /tmp/softroce-peers.XXXXXX)
    for mpi in openmpi mpich; do
        "/usr/bin/mpicc.$mpi" -O2 -o "$dir/pingpong.$mpi" "$SOFTROCE_DIR/pingpong.c"
    done
    rc=0
    "$SOFTROCE_DIR/run-vm" --nodes 2 "$@" -- "$SOFTROCE_DIR/peers.sh" --guest "$dir" || rc=$?
    echo "peers: logs in $dir"
    exit "$rc"
fi

dir=$2
cd "$dir"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_orte_tmpdir_base=/dev/shm   # /tmp is 9p: no FIFOs there
failed=0
peer() {  # peer NAME COMMAND...: run a ping-pong, summarize its log
    local name=$1 start=$SECONDS rc=0 tls
    shift
    timeout 150 "$@" >"$name.log" 2>&1 || rc=$?
    grep -q '^pingpong: PASS' "$name.log" || { ((rc)) || rc=1; }
    tls=$(grep -o 'ep_cfg\[[0-9]*\]: tag([^)]*)' "$name.log" | sort -u | tr '\n' ' ' || true)
    printf '%-18s %s (exit %d, %d s) %s\n' "$name" "$( ((rc)) && echo FAIL || echo PASS)" \
        "$rc" $((SECONDS - start)) "$tls"
    grep -E '^rank |^ +[0-9]+ B ' "$name.log" | sed 's/^/    /' || true
    ((rc == 0)) || { tail -n 15 "$name.log" | sed 's/^/    | /'; failed=1; }
}

peer openmpi-ob1-tcp /usr/bin/mpirun.openmpi -np 2 --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include veth0 ./pingpong.openmpi
peer openmpi-ucx-rxe env "${UCX_RXE[@]}" /usr/bin/mpirun.openmpi -np 2 --mca pml ucx \
    --mca btl self -x UCX_TLS -x UCX_NET_DEVICES -x UCX_UD_VERBS_ETH_DGID_CHECK -x UCX_LOG_LEVEL \
    ./pingpong.openmpi
# Hydra starts the second rank on "node1" through node-exec (HYDRA_LAUNCHER* from run-vm).
peer mpich-ucx-rxe env "${UCX_RXE[@]}" /usr/bin/mpiexec.mpich -hosts node0,node1 -n 2 \
    ./pingpong.mpich
grep -q '^rank 1 of 2 on node1' mpich-ucx-rxe.log || { echo "mpich: rank 1 did not run on node1"; failed=1; }
exit "$failed"
