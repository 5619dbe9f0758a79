#!/bin/bash
# PID 1 of the Soft-RoCE guest (started by initramfs-init after switch_root). Reads the job
# that run-vm wrote to /run/ch3rdma/job, creates rxe0, runs the command, records its status.
# With --vms every VM runs this with its own job (NODE); only node0 runs the command.
set -uo pipefail
RUN=/run/ch3rdma
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
. "$(dirname "$0")/common.sh"

power_off() { sync; echo o >/proc/sysrq-trigger; sleep 60 2>/dev/null; }
fail() { echo "$*" >"$RUN/error"; echo "guest-init: $*"; power_off; }

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
# devtmpfs lacks the fd links that udev makes (bash's <(...) needs /dev/fd).
ln -sfn /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do ln -sfn "/proc/self/fd/${i%%:*}" "/dev/${i#*:}"; done
. "$RUN/job" || fail "cannot read the job file"

# Writable host directories over the read-only view, at the same paths.
for i in "${!RW[@]}"; do
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap "rw$i" "${RW[i]}" \
        || fail "cannot mount writable share ${RW[i]}"
done

# Modules come from the extracted Debian kernel; on-demand loads (crypto) need it too.
printf '#!/bin/sh\nexec /sbin/modprobe -d %q "$@"\n' "$KDIR" >/run/modprobe
chmod +x /run/modprobe
echo /run/modprobe >/proc/sys/kernel/modprobe
ip link set lo up
ulimit -l unlimited
if ((VMS)); then
    # One VM per node (run-vm --vms): node NODE on the link, sshd for Hydra; node0 runs
    # the command once every node answers, the others serve until run-vm stops them.
    setup_lan "$NODE" -d "$KDIR" || fail "cannot bring up eth0 and rxe0 on it (node$NODE)"
    hostname "node$NODE"
    lan_hosts "$NODES" >>/etc/hosts
    start_sshd "$RUN" || fail "cannot start sshd on node$NODE"
    ((SLURM == 0)) || start_slurm "$NODE" "$NODES" "$RUN" || fail "cannot start Slurm on node$NODE"
    export_vms_env "$NODES"
    if ((NODE > 0)); then
        echo "node$NODE up" >>"$RUN/output"
        exec sleep infinity
    fi
    wait_for_nodes "$NODES" 600 || fail "the other VMs do not answer ssh"
    ((SLURM == 0)) || wait_for_slurm "$NODES" 300 || fail "Slurm does not report $NODES nodes idle"
else
    setup_rxe -d "$KDIR" || fail "cannot create rxe0 on veth0"
    hostname node0
    echo "$RXE_ADDR $(node_list "$NODES" | tr , ' ')" >>/etc/hosts
    export_run_env "$NODES"
fi
cd "$CWD" || fail "cannot enter $CWD"
((${#ENV[@]} == 0)) || export "${ENV[@]}"
"${CMD[@]}" </dev/null >>"$RUN/output" 2>&1
echo $? >"$RUN/status"
power_off
