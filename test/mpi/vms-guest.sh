#!/usr/bin/env bash
# vms-guest.sh PREFIX DIR -- runs on node0 of run-vm --nodes 2 --vms [--slurm]: two VMs,
# each with its own kernel and rxe0, one Ethernet link; Hydra launches on node1 over ssh,
# or through Slurm's srun inside salloc.
. "$(dirname "$0")/../lib.sh"
P=$1 W=$2
EXPECT_TIMEOUT=${EXPECT_TIMEOUT:-600}
H=(-hosts "node0,node1")
plan 14

# Run an mpi_check job (CMD...): sets out, rc and n_ok; 0 when it exited 0 with 6 of 6 ok.
run_check() {
    out=$(timeout -k 5 "$EXPECT_TIMEOUT" "$@" 2>&1)
    rc=$?
    n_ok=$(grep -c '^ok ' <<<"$out")
    [ $rc -eq 0 ] && [ "$n_ok" = 6 ]
}
# report STATUS DESCRIPTION [FILTER]: the TAP line; on failure the tail of $out (lines
# matching FILTER, default all but the ok lines) as diagnostics.
report() {
    ok "$1" "$2"
    [ "$1" = 0 ] || grep -E -- "${3:-^[^o]|^o[^k]}" <<<"$out" | tail -12 | diag
}

expect_output 0 'node0.*node1|node1.*node0' "Hydra starts a rank on each VM over ssh" -- \
    sh -c "$P/bin/mpiexec ${H[*]} -n 2 hostname | sort | tr '\n' ' '"

# rxe0 packet counters of node $1 (node0 is this VM), "sent received".
rxe_pkts() {
    local c=/sys/class/infiniband/rxe0/ports/1/hw_counters
    if [ "$1" = node0 ]; then echo "$(cat $c/sent_pkts) $(cat $c/rcvd_pkts)"; else
        ssh "$1" "echo \$(cat $c/sent_pkts) \$(cat $c/rcvd_pkts)"; fi
}
read -r s0 r0 < <(rxe_pkts node0)
read -r s1 r1 < <(rxe_pkts node1)

# 4 ranks, 2 per VM: shm inside a VM, verbs between them; every byte checked.
run_check env MPIR_CVAR_CH3_RDMA_VERBOSE=1 "$P/bin/mpiexec" "${H[@]}" -ppn 2 -n 4 \
    "$W/mpi_check" 1048576
report $? "mpi_check, 4 ranks on 2 VMs: 6 of 6 verified checks pass (exit $rc, $n_ok ok)"
grep -q '^# 4 ranks on 2 kernels$' <<<"$out"
report $? "the ranks of that job run on two kernels (distinct boot ids)" '^#'
n_vb=$(grep -c '^\[ch3:rdma\] rank [0-3] verbs: ' <<<"$out")
[ "$n_vb" = 4 ]
report $? "every rank, on both VMs, ran the verbs transport on its rxe0 ($n_vb of 4 report it)" \
    '^\[ch3:rdma\]'

read -r s0b r0b < <(rxe_pkts node0)
read -r s1b r1b < <(rxe_pkts node1)
d="node0 sent $((s0b - s0)) received $((r0b - r0)), node1 sent $((s1b - s1)) received $((r1b - r1))"
[ $((s0b - s0)) -gt 1000 ] && [ $((r0b - r0)) -gt 1000 ] && [ $((s1b - s1)) -gt 1000 ] &&
    [ $((r1b - r1)) -gt 1000 ]
ok $? "RoCE packets cross the link: rxe0 counters of both VMs ($d)"

# Dynamic processes between the kernels: the parent on node0 spawns its
# children on node1 (mpi_spawn exits 1 if one of its checks failed)
expect_output 0 '^ok 4 ' "spawn across the VMs: data both ways, merge, port, disconnect over verbs" -- \
    env MPI_SPAWN_HOST=node1 "$P/bin/mpiexec" "${H[@]}" -n 1 "$W/mpi_spawn" 2

# Run "$@" on node0 (here) and on node1.
both() { "$@" && ssh node1 "$*"; }
active_mtus() {
    echo "rxe0 active MTU: node0 $(ibv_devinfo -d rxe0 | awk '/active_mtu/ { print $2 }')," \
        "node1 $(ssh node1 "ibv_devinfo -d rxe0" | awk '/active_mtu/ { print $2 }')"
}

# Path MTU: node1's link takes 9000-byte frames (rxe0 MTU 4096), node0's 1500 (1024);
# each connection must use the smaller one (a 4096-byte packet never reaches node0).
ssh node1 ip link set eth0 mtu 9000
m=$(active_mtus)
expect_output 0 '^1\.\.6' "different MTUs on the two VMs ($m): mpi_check passes" -- \
    "$P/bin/mpiexec" "${H[@]}" -n 2 "$W/mpi_check" 1048576
ssh node1 ip link set eth0 mtu 1500

# A lossy link: netem on both VMs' eth0.  mpi_check over it: ping-pong and all-to-all
# verified.  NETEM... DESCRIPTION
netem_check() {
    local q=$1 what=$2 drops st
    both tc qdisc add dev eth0 root netem $q
    run_check "$P/bin/mpiexec" "${H[@]}" -n 2 "$W/mpi_check" 262144
    st=$?
    drops=$(tc -s qdisc show dev eth0 | awk '/dropped/ { sub(",", "", $7); print $7; exit }')
    both tc qdisc del dev eth0 root
    report $st "$what: mpi_check verified ($n_ok of 6, exit $rc; node0 netem dropped $drops)"
}
netem_check "loss 1% delay 5ms" "1% loss and 5 ms delay on the link"
# Jitter as a queue makes it (rate: each packet leaves after the one before, so none
# overtakes another; netem's jitter alone reorders packets, which no single Ethernet path
# does and RC's go-back-N cannot carry: docs/observability.md, "Failures").
netem_check "delay 5ms 5ms rate 1gbit" "5 +- 5 ms jitter on the link"
netem_check "loss 1% delay 5ms 5ms rate 1gbit" "1% loss and 5 +- 5 ms jitter on the link"

# The link goes down for 15 s in the middle of a job (node0 drops all it sends) once the
# ranks talk over verbs (rank 0 printed the kernels line: the ping-pong is next), then comes
# back: RC retries carry the job over it.  The job must still run when the link returns.
f=$W/flap.out
timeout -k 5 "$EXPECT_TIMEOUT" "$P/bin/mpiexec" "${H[@]}" -n 2 "$W/mpi_check" 4194304 >"$f" 2>&1 &
job=$!
until grep -q '^# 2 ranks on 2 kernels$' "$f" || ! kill -0 $job 2>/dev/null; do sleep 0.2; done
hit=no
tc qdisc add dev eth0 root netem loss 100% && sleep 15 && tc qdisc del dev eth0 root &&
    kill -0 $job 2>/dev/null && hit=yes
t0=$(date +%s)
wait $job
rc=$? out=$(<"$f") n_ok=$(grep -c '^ok ' "$f") t=$(($(date +%s) - t0))
[ $hit = yes ] && [ $rc = 0 ] && [ "$n_ok" = 6 ]
report $? "the link down for 15 s while the ranks talk over verbs: the job completes verified ($n_ok of 6, exit $rc, still running when the link returned: $hit, then $t s)"

# Under Slurm (run-vm --slurm): salloc, and Hydra's Slurm bootstrap (srun) instead of ssh.
if sinfo >/dev/null 2>&1; then
    S=(salloc -N 2 -n 4 env -u HYDRA_LAUNCHER "$P/bin/mpiexec")
    out=$(timeout -k 5 "$EXPECT_TIMEOUT" "${S[@]}" -n 4 sh -c 'echo "step $(hostname) ${SLURM_STEP_ID:-none}"' 2>&1)
    steps=$(grep '^step ' <<<"$out" | sort | tr '\n' ' ')
    [ "$(grep -c '^step node[01] [0-9]' <<<"$out")" = 4 ] && grep -q 'step node1' <<<"$out"
    report $? "salloc -N 2: Hydra starts every rank through srun ($steps)"
    run_check "${S[@]}" -n 4 "$W/mpi_check" 1048576 && grep -q '^# 4 ranks on 2 kernels$' <<<"$out"
    report $? "salloc -N 2 mpiexec -n 4 mpi_check: verified on 2 kernels ($n_ok of 6, exit $rc)"
else
    ok 0 "# SKIP no Slurm on these VMs (run-vm --slurm)"
    ok 0 "# SKIP no Slurm on these VMs (run-vm --slurm)"
fi

# Last (node1 stays off): node1 powered off in the middle of a job; rank 0 reports it
# within CONNECT_TIMEOUT, naming the rank and its node.
T=10
out=$(MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT=$T timeout -k 5 90 "$P/bin/mpiexec" -disable-auto-cleanup \
    "${H[@]}" -n 2 "$W/mpi_life" poweroff 2>&1)
t=$(sed -n 's/^kill: rank 0 saw the failure after \([0-9.]*\) s:.*/\1/p' <<<"$out")
[[ -n $t ]] && awk -v t="$t" -v T=$T 'BEGIN { exit !(t <= T + 1) }' && grep -q 'rank 1 on node1' <<<"$out"
report $? "node1 powered off mid-job: rank 0 names rank 1 on node1 within the timeout (${t:-never} s, timeout $T s)" \
    'kill:|ch3:rdma'
done_testing
