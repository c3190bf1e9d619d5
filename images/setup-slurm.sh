#!/usr/bin/env bash
# Start a single-node Slurm cluster on this machine (root, Debian, no systemd), for the
# tests marked `slurm` and for trying `slurm:` matrices locally. Idempotent: installs
# what is missing, writes the config, starts the daemons that are not running, and
# waits until `sinfo` shows the node idle.
#   bash images/setup-slurm.sh            # 2 GPUs of type rtx3090 declared as gres
#   HARNESS_SLURM_GPUS=4 bash images/setup-slurm.sh
# The GPUs are character device files (/dev/fakegpuN, major 195 like /dev/nvidiaN):
# Slurm hands them out and sets CUDA_VISIBLE_DEVICES, nothing is behind them.
# Accounting goes through slurmdbd + MariaDB so `sacct` keeps each job's end state.
# Logs and pid files: /var/log/harness-slurm/, /run/harness-slurm/.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt-need.sh"
export DEBIAN_FRONTEND=noninteractive
GPUS=${HARNESS_SLURM_GPUS:-2}
GPU_TYPE=${HARNESS_SLURM_GPU_TYPE:-rtx3090}
NODE=$(hostname)
LOG=/var/log/harness-slurm
RUN=/run/harness-slurm
# shellcheck disable=SC2086
need_packages setup-slurm $SLURM_NEEDS
mkdir -p "$LOG" "$RUN" /var/spool/slurmctld /var/spool/slurmd /etc/slurm /run/munge
chown slurm:slurm "$LOG" "$RUN" /var/spool/slurmctld 2>/dev/null || true

# Fake GPU device files.
FILES=""
for i in $(seq 0 $((GPUS - 1))); do
    [ -c "/dev/fakegpu$i" ] || mknod "/dev/fakegpu$i" c 195 "$i"
done
LAST=$((GPUS - 1))
if [ "$GPUS" -gt 1 ]; then FILES="/dev/fakegpu[0-$LAST]"; else FILES=/dev/fakegpu0; fi
MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024) - 1024}' /proc/meminfo)
# At least 4 CPUs (slurmd accepts more than it has with config_overrides), so on a
# 2-core machine the GPUs, not the cores, are what makes the third GPU job wait.
CPUS=$(nproc); [ "$CPUS" -ge 4 ] || CPUS=4

# Config. Written only when it changes, so a running cluster is not disturbed.
write() {  # write FILE MODE OWNER: stdin -> FILE when different
    local tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if ! cmp -s "$tmp" "$1"; then
        install -m "$2" -o "$3" "$tmp" "$1"
        CHANGED=1
    fi
    rm -f "$tmp"
}
CHANGED=0
write /etc/slurm/slurm.conf 644 root <<EOF
# Written by harness images/setup-slurm.sh: a single-node test cluster.
ClusterName=harness
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# A job that names no --mem gets this much, not the whole node (one job at a time).
DefMemPerCPU=2048
GresTypes=gpu
MinJobAge=300
KillWait=5
InactiveLimit=0
JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:$GPU_TYPE:$GPUS State=UNKNOWN
PartitionName=gpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
write /etc/slurm/gres.conf 644 root <<EOF
AutoDetect=off
Name=gpu Type=$GPU_TYPE File=$FILES
EOF
write /etc/slurm/cgroup.conf 644 root <<EOF
CgroupPlugin=cgroup/v1
ConstrainCores=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
ConstrainDevices=no
EOF
write /etc/slurm/slurmdbd.conf 600 slurm <<EOF
AuthType=auth/munge
DbdHost=$NODE
DbdAddr=127.0.0.1
SlurmUser=slurm
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=harness
StorageLoc=slurm_acct_db
EOF

alive() {  # alive PIDFILE: the daemon named by the file (slurmd.pid: slurmd) runs
    local name
    name="$(basename "$1" .pid)"
    runs_as "$1" "$name"
}
restart() {  # restart PIDFILE: stop it (config changed) so the start below picks it up
    if alive "$1"; then kill "$(cat "$1")"; for _ in $(seq 1 20); do alive "$1" || break; sleep 0.5; done; fi
}
if [ "$CHANGED" = 1 ]; then
    echo "setup-slurm: configuration written"
    restart "$RUN/slurmd.pid"; restart "$RUN/slurmctld.pid"; restart "$RUN/slurmdbd.pid"
fi

# munge
if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile /etc/munge/munge.key 2>/dev/null || \
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
fi
chown munge:munge /etc/munge/munge.key /run/munge; chmod 400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    echo "setup-slurm: starting munged"
    runuser -u munge -- munged --pid-file=/run/munge/munged.pid 2>/dev/null || munged -f
    sleep 0.5
fi

# MariaDB for slurmdbd
if ! mysqladmin ping >/dev/null 2>&1; then
    echo "setup-slurm: starting mariadbd"
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql >/dev/null
    setsid nohup mariadbd --user=mysql --pid-file=/run/mysqld/mariadbd.pid \
        >"$LOG/mariadbd.log" 2>&1 </dev/null &
    for _ in $(seq 1 60); do mysqladmin ping >/dev/null 2>&1 && break; sleep 0.5; done
fi
mysql -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'harness';
          GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

if ! alive "$RUN/slurmdbd.pid"; then
    echo "setup-slurm: starting slurmdbd"
    slurmdbd
    for _ in $(seq 1 40); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
fi
sacctmgr -n list cluster format=cluster | grep -qw harness || sacctmgr -i add cluster harness >/dev/null
if ! alive "$RUN/slurmctld.pid"; then
    echo "setup-slurm: starting slurmctld"
    slurmctld
fi
if ! alive "$RUN/slurmd.pid"; then
    echo "setup-slurm: starting slurmd"
    slurmd
fi
for _ in $(seq 1 60); do
    state=$(sinfo -h -n "$NODE" -o %t 2>/dev/null || true)
    case "$state" in idle*|mix*|alloc*) break ;; esac
    sleep 0.5
done
case "$state" in
    idle*|mix*|alloc*) ;;
    down*|drain*) scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true; sleep 1
                  state=$(sinfo -h -n "$NODE" -o %t) ;;
esac
case "$state" in
    idle*|mix*|alloc*) echo "setup-slurm: node $NODE $state, gres gpu:$GPU_TYPE:$GPUS, partition gpu" ;;
    *) echo "setup-slurm: node $NODE is '$state' (logs in $LOG)"; tail -5 "$LOG"/slurm*.log; exit 3 ;;
esac
