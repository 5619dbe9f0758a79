# Shared helpers for the Soft-RoCE test bed; sourced by the scripts in this directory.
# shellcheck shell=bash disable=SC2034

SOFTROCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SOFTROCE_CACHE=${CH3RDMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ch3-rdma}/softroce
# Address of the veth end that carries rxe0; every "node" name resolves to it.
RXE_ADDR=10.77.0.1
# run-vm --vms: node i of the virtual Ethernet link between the VMs is $LAN_NET.(i+1).
LAN_NET=10.77.1

die() { echo "${0##*/}: $*" >&2; exit 1; }

# Install the Debian packages of the named groups (build-aux/install-deps.sh).
ensure_pkgs() {
    bash "$SOFTROCE_DIR/../../build-aux/install-deps.sh" "$@" || exit 1
}

# The ABI (uname -r of the guest) of Debian's current default kernel, e.g. 6.1.0-56-amd64.
kernel_abi() {
    local abi
    abi=$(apt-cache depends linux-image-amd64 2>/dev/null \
          | sed -n 's/^ *Depends: linux-image-\([0-9][^ ]*\)$/\1/p' | head -n1)
    [[ -n $abi ]] || die "cannot resolve the kernel ABI from 'apt-cache depends linux-image-amd64' (run apt-get update?)"
    echo "$abi"
}

# Names node0..node(N-1), comma separated.
node_list() {
    local i out=node0
    for ((i = 1; i < $1; i++)); do out+=",node$i"; done
    echo "$out"
}

# Environment of the command: CH3RDMA_NODES (names for "$1" nodes), CH3RDMA_DEVICE (rxe0,
# else the first verbs device) and Hydra settings so that mpiexec starts every host through
# node-exec, even when the host name resolves to a local address.
export_run_env() {
    export CH3RDMA_NODES CH3RDMA_DEVICE
    CH3RDMA_NODES=$(node_list "$1")
    [[ -e /sys/class/infiniband/rxe0 ]] && CH3RDMA_DEVICE=rxe0 \
        || CH3RDMA_DEVICE=$(ls /sys/class/infiniband | head -n1)
    export HYDRA_LAUNCHER=ssh HYDRA_LAUNCHER_EXEC="$SOFTROCE_DIR/node-exec" HYDRA_LAUNCHER_AUTOFORK=0
}

# run-vm --vms: the launcher is ssh to the other VMs (Hydra's ssh bootstrap, as on a
# cluster), not node-exec.
export_vms_env() {
    export_run_env "$1"
    unset HYDRA_LAUNCHER_EXEC HYDRA_LAUNCHER_AUTOFORK
}

# /etc/hosts lines of the nodes on the link between the VMs: node0..node($1-1).
lan_hosts() {
    local i
    for ((i = 0; i < $1; i++)); do echo "$LAN_NET.$((i + 1)) node$i"; done
}

# Bring up eth0 (virtio-net, on the link run-vm --vms made) as node $1 and create rxe0 on
# it; the rest are modprobe options.  Without udev virtio_net is loaded by hand.
setup_lan() {
    local i=$1
    shift
    modprobe -a "$@" virtio_net rdma_rxe || return
    ip addr replace "$LAN_NET.$((i + 1))/24" dev eth0 && ip link set eth0 up || return
    [[ -e /sys/class/infiniband/rxe0 ]] || rdma link add rxe0 type rxe netdev eth0
}

# Serve ssh as root with the key pair DIR/id{,.pub} (made by run-vm) and let root reach
# every node with it; host keys come from the host's /etc/ssh or are made in the overlay.
start_sshd() {
    mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh || return
    ssh-keygen -A >/dev/null || return
    cp "$1/id" /root/.ssh/id_ed25519 && cp "$1/id.pub" /root/.ssh/authorized_keys || return
    chmod 600 /root/.ssh/id_ed25519 /root/.ssh/authorized_keys
    printf 'Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' \
        >/root/.ssh/config
    /usr/sbin/sshd -o UsePAM=no -o UseDNS=no -o PasswordAuthentication=no \
        -o PermitRootLogin=prohibit-password
}

# Slurm on the VMs (run-vm --vms --slurm): munged with DIR/munge.key (made by run-vm),
# slurmctld on node0, slurmd on every node, as root; node $1 of $2.
start_slurm() {
    local i=$1 n=$2 dir=$3 cpus
    mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge /var/spool/slurmd \
        /var/spool/slurmctld /var/log/slurm || return
    cp "$dir/munge.key" /etc/munge/munge.key || return
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
    chmod 0400 /etc/munge/munge.key
    setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged 2>&1 || return
    cpus=$(nproc)
    # slurmd initialises its cgroup plugin even with proctrack/linuxproc: cgroup v2, and
    # no systemd (no dbus) in the guest
    mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup || return
    mkdir -p /sys/fs/cgroup/system.slice || return
    printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' >/etc/slurm/cgroup.conf
    cat >/etc/slurm/slurm.conf <<CONF
ClusterName=ch3rdma
SlurmctldHost=node0
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/linear
ReturnToService=2
MpiDefault=none
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=node[0-$((n - 1))] CPUs=$cpus State=UNKNOWN
PartitionName=vms Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    if ((i == 0)); then
        slurmctld || { echo "slurmctld failed:"; tail -5 /var/log/slurm/slurmctld.log; return 1; }
    fi
    slurmd || { echo "slurmd failed:"; tail -5 /var/log/slurm/slurmd.log; return 1; }
}

# Wait (up to $2 s) until Slurm reports $1 nodes idle.
wait_for_slurm() {
    local t
    for ((t = 0; t < $2; t++)); do
        [[ $(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l) -ge $1 ]] && return 0
        sleep 1
    done
    return 1
}

# Wait (up to $2 s) until every node 1..$1-1 answers ssh.
wait_for_nodes() {
    local i t
    for ((i = 1; i < $1; i++)); do
        for ((t = 0; ; t++)); do
            ssh -o ConnectTimeout=5 -o BatchMode=yes "node$i" true 2>/dev/null && break
            ((t < $2)) || return 1
            sleep 1
        done
    done
}

# Create rxe0 on a veth pair (root; rdma_rxe must be loadable with "modprobe $*").
setup_rxe() {
    modprobe -a "$@" rdma_rxe veth || return
    {
        ip link show veth0 >/dev/null 2>&1 || echo "link add veth0 type veth peer name veth1"
        echo "addr replace $RXE_ADDR/24 dev veth0"
        echo "link set veth1 up"
        echo "link set veth0 up"
    } | ip -batch - || return
    [[ -e /sys/class/infiniband/rxe0 ]] || rdma link add rxe0 type rxe netdev veth0
}

# Index of the device's RoCE v2 IPv4-mapped GID (perftest -x), from sysfs; 0 if none.
roce_v2_ipv4_gid() {
    local port=/sys/class/infiniband/${1:-rxe0}/ports/1 f i
    for f in "$port"/gids/*; do
        i=${f##*/}
        [[ $(<"$port/gid_attrs/types/$i") == "RoCE v2" && $(<"$f") == 0000:0000:0000:0000:0000:ffff:* ]] \
            2>/dev/null && { echo "$i"; return; }
    done
    echo 0
}

# TAP output: "tap STATUS DESCRIPTION" (STATUS 0 = ok), "diag FILE..." comments.
tap_n=0
tap() {
    tap_n=$((tap_n + 1))
    if [[ $1 == 0 ]]; then echo "ok $tap_n - $2"; else echo "not ok $tap_n - $2"; fi
}
diag() { sed 's/^/# /' "$@"; }
