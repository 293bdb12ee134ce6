#!/usr/bin/env bash
# scripts/local-slurm.sh -- a real one-node SLURM cluster on this machine, for tests and demos.
#
#   scripts/local-slurm.sh start     install packages if missing, write /etc/slurm, start daemons,
#                                    wait until the node is idle (no-op if already healthy)
#   scripts/local-slurm.sh stop      cancel all jobs, stop slurmd, slurmctld and munged (idempotent)
#   scripts/local-slurm.sh status    daemons and `sinfo`; exit 0 only if the node is usable
#   scripts/local-slurm.sh restart   stop, then start (applies a changed config; cancels jobs)
#   scripts/local-slurm.sh config    print the slurm.conf/gres.conf that `start` would write
#
# What it sets up (Debian 12, slurm 22.05, munge 0.5; needs root; no systemd):
#   * packages: slurmctld slurmd slurm-client munge (--no-install-recommends, 8 packages;
#     never the slurm-wlm meta-package). `apt-get update` only if the install fails without it.
#   * /etc/slurm/slurm.conf + gres.conf, generated deterministically from the knobs below and
#     whether `hostname` resolves to loopback. One node named `localhost` (NodeAddr=127.0.0.1, so
#     nothing depends on the machine's hostname) SHAPED LIKE A GPU NODE OF A REAL CLUSTER: 64 CPUs,
#     1,000 GB of memory and 8 fake H100s by default, declared with SlurmdParameters=config_overrides
#     (slurmd takes the declared resources instead of draining the node for lacking them), so the
#     requests of profiles/slurm as a site sets it (4 GPUs, 256 GB, 17 CPUs for a TRACE task) are
#     admitted and the real sbatch lines run here (`codyra rehearse`). Nothing enforces them: the
#     jobs share this machine's real cores and memory, so callers limit how many run at once
#     (Snakemake's `jobs`). Partitions `debug` (default), `gpu` and `cpu` (CPU-only jobs); the fake
#     GPU GRES (`gpu:h100:8`, character devices made with mknod under /var/lib/local-slurm/gpus,
#     AutoDetect=off) so `--gpus=1`, `--gpus=h100:4`, `--gres=gpu:1` and submitit's
#     `gpus_per_node=1` schedule and get CUDA_VISIBLE_DEVICES.
#     No accounting (no slurmdbd): `sacct` fails, so Snakemake's slurm plugin must use
#     `slurm-status-command: squeue` (MinJobAge=600 keeps finished jobs visible to squeue; the
#     plugin needs >= 120 s) and `slurm-no-account: true` -- see profiles/slurm-local/.
#     Fast requeue for tests: AuthInfo=cred_expire=10, SchedulerParameters=sched_interval=5,
#     bf_interval=5 (with defaults each requeue waits 120-160 s; here ~13-16 s), and
#     batch_sched_delay=0 (default 3 s: a trivial job then takes 1-3 s instead of ~1 s).
#   * Logs: /var/log/slurm/slurmctld.log, /var/log/slurm/slurmd.log, /var/log/munge/munged.log.
#   * Nothing to export: every Slurm command reads /etc/slurm/slurm.conf, munge its default socket.
#
# Measured here (2 cores, Debian 12, slurm 22.05.8): start cold (packages not installed) 9.7 s
# with downloads, 5.3-7.6 s with cached .debs; warm start (installed, stopped) 0.4-0.6 s; stop
# 3.3-3.9 s; trivial `sbatch --wrap true` submit -> COMPLETED (squeue) ~1.0 s.
#
# Idempotence: `start` on a healthy cluster whose config matches what it would write is a no-op.
# If the config it would write differs from the one the running cluster was started with (e.g.
# the machine's memory changed, or this script changed), `start` restarts the cluster when no
# jobs are queued, and refuses (exit 3, "run restart") when jobs are queued. A slurm.conf in
# /etc/slurm that this script did not write is never overwritten unless LOCAL_SLURM_OVERWRITE=1
# (the old one is then kept as slurm.conf.before-local-slurm).
#
# !!! CI TRAP: once slurm-client is installed (/usr/bin/scontrol exists) but slurmctld is NOT
# running, EVERY `snakemake` start (even `snakemake --version`, and each local `run:` job's
# sub-process) waits ~9 s on `scontrol show config` inside snakemake-executor-plugin-slurm.
# So CI must run the non-SLURM Snakemake tests BEFORE this script installs the packages, or
# while the cluster is RUNNING (start it first, stop it only at the very end) -- never between
# `stop` and the end of the job on a machine where the packages are installed.
#
# Environment knobs (all optional):
#   LOCAL_SLURM_GPUS=8               number of fake GPUs on the node (0 = no GRES)
#   LOCAL_SLURM_CPUS=64              CPUs the node declares (at least the machine's own)
#   LOCAL_SLURM_MEMORY_MB=1024000    memory the node declares (at least the machine's own)
#   LOCAL_SLURM_GPU_TYPE=h100        GRES type name ("" for untyped gpu:N)
#   LOCAL_SLURM_START_TIMEOUT=60     seconds to wait for the node to become idle
#   LOCAL_SLURM_STOP_TIMEOUT=30      seconds to wait for jobs / each daemon to exit
#   LOCAL_SLURM_OVERWRITE=0          1: replace a foreign /etc/slurm/slurm.conf
#   LOCAL_SLURM_FORCE=0              1: `start` restarts on config change even with queued jobs

set -euo pipefail

readonly CONF_DIR=/etc/slurm
readonly LOG_DIR=/var/log/slurm
readonly CTLD_STATE_DIR=/var/spool/slurmctld
readonly SLURMD_SPOOL_DIR=/var/spool/slurmd
readonly STATE_DIR=/var/lib/local-slurm
readonly GPU_DIR=/var/lib/local-slurm/gpus
readonly RUN_DIR=/run/local-slurm
readonly STARTED_HASH_FILE=/run/local-slurm/config.sha256
readonly LOCK_FILE=/run/lock/local-slurm.lock
readonly CTLD_PIDFILE=/run/slurmctld.pid
readonly SLURMD_PIDFILE=/run/slurmd.pid
readonly MUNGE_PIDFILE=/run/munge/munged.pid
readonly MUNGE_SOCKET=/run/munge/munge.socket.2
readonly NODE=localhost
readonly MARKER="# Generated by codyra scripts/local-slurm.sh -- do not edit; rerun 'scripts/local-slurm.sh start'."
readonly PACKAGES=(slurmctld slurmd slurm-client munge)

GPUS=${LOCAL_SLURM_GPUS:-8}
CPUS=${LOCAL_SLURM_CPUS:-64}
MEMORY_MB=${LOCAL_SLURM_MEMORY_MB:-1024000}
GPU_TYPE=${LOCAL_SLURM_GPU_TYPE-h100}
START_TIMEOUT=${LOCAL_SLURM_START_TIMEOUT:-60}
STOP_TIMEOUT=${LOCAL_SLURM_STOP_TIMEOUT:-30}

# ---------------------------------------------------------------------------------------------
# helpers

say() { printf 'local-slurm: %s\n' "$*"; }
warn() { printf 'local-slurm: warning: %s\n' "$*" >&2; }
die() {
    local code=1
    if [[ $# -gt 1 ]]; then code=$2; fi
    printf 'local-slurm: error: %s\n' "$1" >&2
    exit "$code"
}

now() { date +%s.%N; }
# elapsed START -> seconds since START with two decimals
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

usage() {
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
}

require_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (writes /etc/slurm, starts daemons)"
}

take_lock() {
    mkdir -p "$(dirname "$LOCK_FILE")"
    exec 9>"$LOCK_FILE"
    if ! flock -n 9; then
        say "waiting for another scripts/local-slurm.sh (lock $LOCK_FILE)"
        flock -w 300 9 || die "another scripts/local-slurm.sh holds $LOCK_FILE for > 300 s"
    fi
}

packages_missing() {
    local pkg status
    for pkg in "${PACKAGES[@]}"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
        [[ $status == installed ]] || printf '%s\n' "$pkg"
    done
}

installed() { [[ -z $(packages_missing) ]]; }

# apt-get install, keeping Debian's maintainer scripts from starting services (we start the
# daemons ourselves, with our config); `apt-get update` only when the plain install fails.
install_packages() {
    local missing t0 temp_policy=""
    missing=$(packages_missing)
    [[ -n $missing ]] || return 0
    t0=$(now)
    say "installing: $(tr '\n' ' ' <<<"$missing")(apt-get, --no-install-recommends)"
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        temp_policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\n# temporary, scripts/local-slurm.sh\nexit 101\n' >"$temp_policy"
        chmod 755 "$temp_policy"
    fi
    local -a apt=(apt-get install -y -q --no-install-recommends "${PACKAGES[@]}")
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" >/tmp/local-slurm-apt.log 2>&1; then
        say "apt-get install failed; running apt-get update and retrying"
        DEBIAN_FRONTEND=noninteractive apt-get update -q >>/tmp/local-slurm-apt.log 2>&1 || true
        if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" >>/tmp/local-slurm-apt.log 2>&1; then
            [[ -z $temp_policy ]] || rm -f "$temp_policy"
            tail -n 20 /tmp/local-slurm-apt.log >&2
            die "package installation failed (full log: /tmp/local-slurm-apt.log)"
        fi
    fi
    [[ -z $temp_policy ]] || rm -f "$temp_policy"
    say "packages installed in $(elapsed "$t0") s"
}

# pid of a running daemon: from its pidfile, else the (single) process with that exact name
daemon_pid() {
    local name=$1 pidfile=$2 pid=""
    if [[ -r $pidfile ]]; then
        pid=$(tr -dc '0-9' <"$pidfile")
        if [[ -n $pid && -r /proc/$pid/comm && $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]]; then
            printf '%s\n' "$pid"
            return 0
        fi
    fi
    pid=$(pgrep -x "$name" 2>/dev/null | head -n 1 || true)
    [[ -n $pid ]] || return 1
    printf '%s\n' "$pid"
}

ctld_pid() { daemon_pid slurmctld "$CTLD_PIDFILE"; }
slurmd_pid() { daemon_pid slurmd "$SLURMD_PIDFILE"; }
munged_pid() { daemon_pid munged "$MUNGE_PIDFILE"; }

any_daemon_up() { ctld_pid >/dev/null || slurmd_pid >/dev/null || munged_pid >/dev/null; }
all_daemons_up() { ctld_pid >/dev/null && slurmd_pid >/dev/null && munged_pid >/dev/null; }

# node state as sinfo prints it (idle, mixed, drained, idle*, ...); empty if no answer
node_state() {
    ctld_pid >/dev/null || return 0
    timeout 10 sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | awk 'NR == 1 { print; exit }' || true
}

state_usable() {
    case $1 in
        idle | mixed | allocated | completing | planned) return 0 ;;
        *) return 1 ;;
    esac
}

queued_job_count() {
    local out=""
    if ctld_pid >/dev/null; then out=$(timeout 10 squeue -h -o '%A' 2>/dev/null || true); fi
    if [[ -z $out ]]; then echo 0; else wc -l <<<"$out"; fi
}

# ---------------------------------------------------------------------------------------------
# configuration

# The declared node: "CPUs=64 Boards=1 SocketsPerBoard=1 CoresPerSocket=64 ThreadsPerCore=1 RealMemory=1024000",
# never less than what `slurmd -C` finds on this machine.
node_hardware() {
    local line real_cpus real_mem cpus mem
    line=$(slurmd -C 2>/dev/null | awk '/^NodeName=/ { print; exit }') ||
        die "slurmd -C failed"
    [[ -n $line ]] || die "slurmd -C printed no NodeName= line"
    real_cpus=$(sed -nE 's/.* CPUs=([0-9]+).*/\1/p' <<<"$line")
    real_mem=$(sed -nE 's/.* RealMemory=([0-9]+).*/\1/p' <<<"$line")
    [[ -n $real_cpus && -n $real_mem ]] || die "cannot read CPUs and RealMemory from: $line"
    cpus=$((CPUS > real_cpus ? CPUS : real_cpus))
    mem=$((MEMORY_MB > real_mem ? MEMORY_MB : real_mem))
    printf 'CPUs=%d Boards=1 SocketsPerBoard=1 CoresPerSocket=%d ThreadsPerCore=1 RealMemory=%d\n' "$cpus" "$cpus" "$mem"
}

# loopback-only binding works only if `hostname` resolves to 127.x (else slurmctld dies at start)
hostname_is_loopback() {
    local addr
    addr=$(getent hosts "$(hostname)" 2>/dev/null | awk 'NR == 1 { print $1 }' || true)
    [[ $addr == 127.* ]]
}

gen_slurm_conf() {
    local hw gres_line="" comm_line
    hw=$(node_hardware)
    if ((GPUS > 0)); then
        if [[ -n $GPU_TYPE ]]; then gres_line=" Gres=gpu:$GPU_TYPE:$GPUS"; else gres_line=" Gres=gpu:$GPUS"; fi
    fi
    if hostname_is_loopback; then
        comm_line="CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"
    else
        comm_line="# CommunicationParameters=NoCtldInAddrAny,NoInAddrAny left out: hostname '$(hostname)' does not resolve to 127.x"
    fi
    cat <<EOF
$MARKER
# One-node test cluster: node 'localhost' = this machine. Machine-wide (one cluster per host).
ClusterName=localci
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# short credential lifetime: a requeued job may restart ~10 s after it ended (default 120 s)
AuthInfo=cred_expire=10
SlurmctldPort=6817
SlurmdPort=6818
$comm_line
StateSaveLocation=$CTLD_STATE_DIR
SlurmdSpoolDir=$SLURMD_SPOOL_DIR
SlurmctldPidFile=$CTLD_PIDFILE
SlurmdPidFile=$SLURMD_PIDFILE
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
# the node is declared as a cluster's GPU node: slurmd takes the declared CPUs, memory and GPUs
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5,bf_interval=5,batch_sched_delay=0
# keep finished jobs visible to squeue for 10 min: the Snakemake plugin's squeue status mode
# needs >= 120 s (no slurmdbd here, so sacct does not work)
MinJobAge=600
KillWait=10
InactiveLimit=0
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 $hw$gres_line State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$NODE Default=NO MaxTime=INFINITE State=UP
PartitionName=cpu Nodes=$NODE Default=NO MaxTime=INFINITE State=UP
EOF
}

gen_gres_conf() {
    local type_part=""
    [[ -z $GPU_TYPE ]] || type_part=" Type=$GPU_TYPE"
    printf '%s\n' "$MARKER"
    printf '# fake GPUs: character devices (c 1 3, like /dev/null); regular files or Count= alone drain the node\n'
    printf 'AutoDetect=off\n'
    if ((GPUS > 0)); then
        printf 'NodeName=%s Name=gpu%s File=%s/gpu[0-%d]\n' "$NODE" "$type_part" "$GPU_DIR" "$((GPUS - 1))"
    fi
}

# generate both files into directory $1
gen_configs() {
    gen_slurm_conf >"$1/slurm.conf"
    gen_gres_conf >"$1/gres.conf"
}

configs_hash() { cat "$1/slurm.conf" "$1/gres.conf" | sha256sum | awk '{ print $1 }'; }

check_foreign_config() {
    local f=$CONF_DIR/slurm.conf
    [[ -e $f ]] || return 0
    if head -n 1 "$f" | grep -qF "$MARKER"; then return 0; fi
    if [[ ${LOCAL_SLURM_OVERWRITE:-0} == 1 ]]; then
        cp -p "$f" "$f.before-local-slurm"
        warn "replacing a slurm.conf not written by this script (kept as $f.before-local-slurm)"
        return 0
    fi
    die "$f was not written by this script; refusing to overwrite it (set LOCAL_SLURM_OVERWRITE=1)"
}

# install generated configs from directory $1; prints "changed" or "unchanged"
install_configs() {
    local src=$1 changed=unchanged f
    mkdir -p "$CONF_DIR"
    for f in slurm.conf gres.conf; do
        if ! cmp -s "$src/$f" "$CONF_DIR/$f"; then
            install -m 644 "$src/$f" "$CONF_DIR/$f"
            changed=changed
        fi
    done
    printf '%s\n' "$changed"
}

make_fake_gpus() {
    local i dev
    mkdir -p "$GPU_DIR"
    for ((i = 0; i < GPUS; i++)); do
        dev=$GPU_DIR/gpu$i
        if [[ ! -c $dev ]]; then
            rm -f "$dev"
            mknod -m 666 "$dev" c 1 3
        fi
    done
}

prepare_dirs() {
    mkdir -p "$LOG_DIR" "$CTLD_STATE_DIR" "$SLURMD_SPOOL_DIR" "$STATE_DIR" "$RUN_DIR"
    chmod 755 "$CTLD_STATE_DIR" "$SLURMD_SPOOL_DIR"
    [[ -d /sys/fs/cgroup ]] || warn "/sys/fs/cgroup missing: slurmd 22.05 refuses to start without a cgroup filesystem"
}

# ---------------------------------------------------------------------------------------------
# daemons

start_munge() {
    if munged_pid >/dev/null; then return 0; fi
    if [[ ! -s /etc/munge/munge.key ]]; then
        say "creating /etc/munge/munge.key"
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 755 /run/munge
    # 9>&-: the daemons must not inherit the lock's file descriptor
    runuser -u munge -- /usr/sbin/munged --force 9>&- ||
        die "munged failed to start (see /var/log/munge/munged.log)"
    local deadline=$((SECONDS + 10))
    until munge -n 2>/dev/null | unmunge >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "munged does not answer on $MUNGE_SOCKET (see /var/log/munge/munged.log)"
        sleep 0.1
    done
}

show_log_tail() {
    local f=$1
    [[ -r $f ]] || return 0
    printf -- '--- last lines of %s ---\n' "$f" >&2
    tail -n 15 "$f" >&2
}

start_slurmctld() {
    if ctld_pid >/dev/null; then return 0; fi
    if ! slurmctld 9>&-; then
        show_log_tail "$LOG_DIR/slurmctld.log"
        die "slurmctld failed to start"
    fi
    local deadline=$((SECONDS + 15))
    until ctld_pid >/dev/null; do
        if ((SECONDS >= deadline)); then
            show_log_tail "$LOG_DIR/slurmctld.log"
            die "slurmctld did not stay up"
        fi
        sleep 0.1
    done
}

start_slurmd() {
    if slurmd_pid >/dev/null; then return 0; fi
    if ! slurmd -N "$NODE" 9>&-; then
        show_log_tail "$LOG_DIR/slurmd.log"
        die "slurmd failed to start"
    fi
}

# wait until sinfo shows the node usable; resume it if drained/down (e.g. by an earlier bad config)
wait_node_usable() {
    local deadline=$((SECONDS + START_TIMEOUT)) state last_resume=-10
    while :; do
        state=$(node_state)
        if state_usable "$state"; then return 0; fi
        case $state in
            drain* | down | fail | inval*)
                if ((SECONDS - last_resume >= 3)); then
                    say "node is '$state'; resuming it"
                    timeout 10 scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
                    last_resume=$SECONDS
                fi
                ;;
        esac
        if ((SECONDS >= deadline)); then
            timeout 10 scontrol show node "$NODE" >&2 || true
            show_log_tail "$LOG_DIR/slurmctld.log"
            show_log_tail "$LOG_DIR/slurmd.log"
            die "node '$NODE' not usable after ${START_TIMEOUT} s (state '${state:-no answer}')"
        fi
        if ! slurmd_pid >/dev/null; then
            show_log_tail "$LOG_DIR/slurmd.log"
            die "slurmd exited during start-up"
        fi
        if ! ctld_pid >/dev/null; then
            show_log_tail "$LOG_DIR/slurmctld.log"
            die "slurmctld exited during start-up"
        fi
        sleep 0.1
    done
}

# terminate processes given as PID:NAME pairs and wait for all to exit; SIGKILL after the timeout
stop_pids() {
    local pair pid name deadline=$((SECONDS + STOP_TIMEOUT)) alive
    for pair in "$@"; do kill -TERM "${pair%%:*}" 2>/dev/null || true; done
    while :; do
        alive=()
        for pair in "$@"; do
            if kill -0 "${pair%%:*}" 2>/dev/null; then alive+=("$pair"); fi
        done
        ((${#alive[@]} > 0)) || return 0
        if ((SECONDS >= deadline)); then
            for pair in "${alive[@]}"; do
                pid=${pair%%:*} name=${pair#*:}
                warn "$name (pid $pid) still running after ${STOP_TIMEOUT} s; sending SIGKILL"
                kill -KILL "$pid" 2>/dev/null || true
            done
            sleep 0.5
            return 0
        fi
        sleep 0.05
    done
}

cancel_all_jobs() {
    ctld_pid >/dev/null || return 0
    local ids deadline
    ids=$(timeout 10 squeue -h -o '%A' 2>/dev/null || true)
    [[ -n $ids ]] || return 0
    say "cancelling $(wc -l <<<"$ids") job(s)"
    # shellcheck disable=SC2086  # word splitting of the id list is intended
    timeout 20 scancel $ids 2>/dev/null || true
    deadline=$((SECONDS + STOP_TIMEOUT))
    while [[ -n $(timeout 10 squeue -h -o '%A' -t PD,R,CG,CF,S,RQ,RS,RH,SO,SI,ST 2>/dev/null || true) ]]; do
        if ((SECONDS >= deadline)); then
            warn "jobs still present after ${STOP_TIMEOUT} s; stopping the daemons anyway"
            break
        fi
        sleep 0.2
    done
}

stop_daemons() {
    local pid steps
    local -a last=()
    cancel_all_jobs
    # slurmd first (it reports to slurmctld on the way down), then slurmctld and munged together
    if pid=$(slurmd_pid); then stop_pids "$pid:slurmd"; fi
    if pid=$(ctld_pid); then last+=("$pid:slurmctld"); fi
    if pid=$(munged_pid); then last+=("$pid:munged"); fi
    ((${#last[@]} == 0)) || stop_pids "${last[@]}"
    # job steps of the jobs cancelled above should be gone; end stragglers by pid
    steps=$(pgrep -x slurmstepd 2>/dev/null || true)
    if [[ -n $steps ]]; then
        warn "ending leftover slurmstepd process(es): $(tr '\n' ' ' <<<"$steps")"
        local -a pairs=()
        for pid in $steps; do pairs+=("$pid:slurmstepd"); done
        stop_pids "${pairs[@]}"
    fi
    rm -f "$STARTED_HASH_FILE"
}

# ---------------------------------------------------------------------------------------------
# commands

print_hints() {
    cat <<EOF
local-slurm: config: $CONF_DIR/slurm.conf, $CONF_DIR/gres.conf (fake GPUs: $GPU_DIR)
local-slurm: logs:   $LOG_DIR/slurmctld.log, $LOG_DIR/slurmd.log, /var/log/munge/munged.log
local-slurm: nothing to export: Slurm commands read $CONF_DIR/slurm.conf, munge uses its default socket.
local-slurm: try:    sbatch --wrap hostname; sbatch -p gpu --gpus=1 --wrap 'echo \$CUDA_VISIBLE_DEVICES'
local-slurm:         snakemake --profile profiles/slurm-local <target>   (squeue status, no account)
EOF
}

trap_note() {
    if [[ -x /usr/bin/scontrol ]]; then
        say "note: slurm-client stays installed; while slurmctld is down every 'snakemake' start"
        say "      waits ~9 s on 'scontrol show config'. Keep the cluster running during Snakemake"
        say "      tests, or remove the packages: apt-get purge -y ${PACKAGES[*]}"
    fi
}

cmd_config() {
    installed || die "packages not installed (needs slurmd -C); run: $0 start" 3
    local tmp
    tmp=$(mktemp -d)
    gen_configs "$tmp"
    printf '# ===== %s/slurm.conf =====\n' "$CONF_DIR"
    cat "$tmp/slurm.conf"
    printf '# ===== %s/gres.conf =====\n' "$CONF_DIR"
    cat "$tmp/gres.conf"
    printf '# sha256: %s\n' "$(configs_hash "$tmp")"
    rm -rf "$tmp"
}

cmd_start() {
    require_root
    take_lock
    local t0 tmp want_hash have_hash="" jobs
    t0=$(now)
    install_packages
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064  # expand $tmp now
    trap "rm -rf '$tmp'" EXIT
    gen_configs "$tmp"
    want_hash=$(configs_hash "$tmp")
    [[ -r $STARTED_HASH_FILE ]] && have_hash=$(<"$STARTED_HASH_FILE")

    if any_daemon_up; then
        if [[ $have_hash != "$want_hash" ]]; then
            jobs=$(queued_job_count)
            if ((jobs > 0)) && [[ ${LOCAL_SLURM_FORCE:-0} != 1 ]]; then
                die "a cluster is running with a different (or unknown) config and has $jobs job(s);
  run '$0 restart' to apply the new config (cancels them), or LOCAL_SLURM_FORCE=1 $0 start" 3
            fi
            say "a cluster is running with a different (or unknown) config; restarting it"
            stop_daemons
        elif all_daemons_up && state_usable "$(node_state)"; then
            say "already running and healthy (node $NODE: $(node_state)); nothing to do"
            return 0
        else
            say "cluster partly up or node not usable; completing the start"
        fi
    fi

    check_foreign_config
    local changed
    changed=$(install_configs "$tmp")
    [[ $changed == unchanged ]] || say "wrote $CONF_DIR/slurm.conf and $CONF_DIR/gres.conf"
    prepare_dirs
    make_fake_gpus
    start_munge
    start_slurmctld
    start_slurmd
    wait_node_usable
    printf '%s\n' "$want_hash" >"$STARTED_HASH_FILE"
    say "cluster up: node $NODE $(node_state), partitions debug (default), gpu and cpu, $(gres_summary); started in $(elapsed "$t0") s"
    print_hints
}

gres_summary() {
    if ((GPUS > 0)); then printf '%d fake GPU(s) gpu:%s%d' "$GPUS" "${GPU_TYPE:+$GPU_TYPE:}" "$GPUS"; else printf 'no GPUs'; fi
}

cmd_stop() {
    require_root
    take_lock
    local t0
    t0=$(now)
    if ! any_daemon_up; then
        say "not running; nothing to do"
        rm -f "$STARTED_HASH_FILE"
        trap_note
        return 0
    fi
    stop_daemons
    say "stopped in $(elapsed "$t0") s"
    trap_note
}

cmd_status() {
    local pid rc=0 state d
    if ! installed; then
        say "packages not installed ($(packages_missing | tr '\n' ' '))"
        return 3
    fi
    for d in munged slurmctld slurmd; do
        if pid=$("pid_of_$d"); then
            printf '%-10s up (pid %s)\n' "$d:" "$pid"
        else
            printf '%-10s down\n' "$d:"
            rc=1
        fi
    done
    if ctld_pid >/dev/null; then
        timeout 10 sinfo || rc=1
        state=$(node_state)
        if state_usable "$state"; then
            printf 'node %s: %s (usable)\n' "$NODE" "$state"
        else
            printf 'node %s: %s (NOT usable)\n' "$NODE" "${state:-no answer}"
            rc=1
        fi
        if [[ -r $STARTED_HASH_FILE ]]; then
            printf 'started by scripts/local-slurm.sh, config sha256 %s\n' "$(<"$STARTED_HASH_FILE")"
        fi
    fi
    printf 'logs: %s/slurmctld.log %s/slurmd.log /var/log/munge/munged.log\n' "$LOG_DIR" "$LOG_DIR"
    return "$rc"
}
pid_of_munged() { munged_pid; }
pid_of_slurmctld() { ctld_pid; }
pid_of_slurmd() { slurmd_pid; }

main() {
    local cmd=${1:-}
    case $cmd in
        start) cmd_start ;;
        stop) cmd_stop ;;
        status) cmd_status ;;
        restart)
            cmd_stop
            exec 9>&- # release the lock before starting again
            cmd_start
            ;;
        config) cmd_config ;;
        -h | --help | help) usage ;;
        *)
            usage >&2
            exit 2
            ;;
    esac
}

main "$@"
