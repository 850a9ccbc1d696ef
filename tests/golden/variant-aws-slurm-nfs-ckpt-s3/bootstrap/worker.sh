#!/bin/bash
# provisioner bootstrap: worker node(s) of cluster llm-pretrain (p5.48xlarge on aws).
# The same bootstrap as cloud-init/worker.yaml, for nodes where cloud-init does not run: a
# container pod's entrypoint (no systemd: daemons are started directly) or a VM reached over SSH.
# Idempotent and resumable: a step that succeeded is not run again; run it again after a failure.
# Set PROVISIONER_NODE_NAME to this node's name (llm-pretrain-<i>) where the hostname is not it.
# Holds cluster secrets: keep it 0600 and delete it from anywhere it was copied once it has run.
set -euo pipefail
umask 022
STATE=/var/lib/provisioner/bootstrap
mkdir -p "$STATE" /var/log/provisioner /run/provisioner
chmod 0700 "$STATE"
exec > >(tee -a /var/log/provisioner/bootstrap.log) 2>&1
log() { echo "provisioner-bootstrap: $*"; }
if command -v flock >/dev/null; then
    exec 9>/run/provisioner/bootstrap.lock
    flock -n 9 || { log "another bootstrap is running"; exit 75; }
fi
HAVE_SYSTEMD=0
[ -d /run/systemd/system ] && HAVE_SYSTEMD=1
FAILED=0

put_file() {  # PATH MODE OWNER, base64 content on stdin; replaced atomically
    local path=$1 mode=$2 owner=$3 tmp
    mkdir -p "$(dirname "$path")"
    tmp=$(mktemp "$path.XXXXXX")
    chmod 0600 "$tmp"
    base64 -d > "$tmp"
    chown "$owner" "$tmp"
    chmod "$mode" "$tmp"
    mv -f "$tmp" "$path"
}

authorize() {  # USER KEY...
    local user=$1 home key
    shift
    home=$(getent passwd "$user" | cut -d: -f6)
    mkdir -p "$home/.ssh"
    touch "$home/.ssh/authorized_keys"
    for key in "$@"; do
        grep -qxF "$key" "$home/.ssh/authorized_keys" || echo "$key" >> "$home/.ssh/authorized_keys"
    done
    chmod 0700 "$home/.ssh"
    chmod 0600 "$home/.ssh/authorized_keys"
    chown -R "$user:$(id -gn "$user")" "$home/.ssh"
}

install_packages() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
    done
    [ -z "${missing[*]:-}" ] && return 0
    log "installing ${missing[*]}"
    command -v apt-get >/dev/null || { log "no apt-get to install ${missing[*]}"; return 1; }
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

node_name() {
    if [ -f /etc/provisioner/identity.env ]; then
        (. /etc/provisioner/identity.env && echo "$NODE_NAME")
    else
        echo "${PROVISIONER_NODE_NAME:-$(hostname -s)}"
    fi
}

pid_file() {
    case $1 in
        munge) echo /run/munge/munged.pid ;;
        slurmctld | slurmd | slurmdbd) echo "/run/$1.pid" ;;
        *) echo "/run/provisioner/$1.pid" ;;
    esac
}

svc_running() {
    local pid
    [ -f "/run/provisioner/$1.done" ] && return 0
    pid=$(cat "$(pid_file "$1")" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

svc_start() {  # start UNIT without systemd, unless it is running already
    local unit=${1%.service} exec_start
    svc_running "$unit" && return 0
    case $unit in
        munge)
            install -d -o munge -g munge -m 0755 /run/munge
            runuser -u munge -- /usr/sbin/munged ;;
        slurmctld) /usr/sbin/slurmctld ;;
        slurmd) /usr/sbin/slurmd -N "$(node_name)" ;;
        slurmdbd) /usr/sbin/slurmdbd ;;
        k3s | k3s-agent)
            setsid nohup k3s "$([ "$unit" = k3s ] && echo server || echo agent)" \
                >> /var/log/provisioner/k3s.log 2>&1 < /dev/null &
            echo $! > "$(pid_file "$unit")" ;;
        provisioner-health)
            # The health watch (a long-running service): restarted after a crash, as systemd's Restart=always.
            setsid bash -c 'while :; do "$0"; sleep 10; done' /usr/local/sbin/provisioner-health \
                >> /var/log/provisioner/health.log 2>&1 < /dev/null &
            echo $! > "$(pid_file "$unit")" ;;
        provisioner-*.timer)
            # The lifetime timers (deadman, idle) as a loop: provisioner-teardown deletes this node
            # through the provider's API where it can, else stops PID 1 (the container) itself.
            setsid bash -c 'while sleep 60; do "$0" || true; done' "/usr/local/sbin/${unit%.timer}" \
                >> /var/log/provisioner/lifetime.log 2>&1 < /dev/null &
            echo $! > "$(pid_file "$unit")" ;;
        provisioner-*.path)
            # A path unit as a loop: run its service again whenever the watched file changes.
            local watched service
            watched=$(sed -n 's/^PathChanged=//p' "/etc/systemd/system/$unit")
            service=$(sed -n 's/^Unit=//p' "/etc/systemd/system/$unit")
            exec_start=$(sed -n 's/^ExecStart=//p' "/etc/systemd/system/$service")
            setsid bash -c 'last=$(cksum < "$0" 2>/dev/null || true)
                while sleep 30; do
                    now=$(cksum < "$0" 2>/dev/null || true)
                    if [ "$now" != "$last" ]; then "$1" && last=$now; fi
                done' "$watched" "$exec_start" >> /var/log/provisioner/lifetime.log 2>&1 < /dev/null &
            echo $! > "$(pid_file "$unit")" ;;
        # retry=0: at boot the head may not admit this node yet (its firewall learns the nodes in
        # the SSH pass, whose bootstrap run mounts it again); mount.nfs would wait 2 minutes.
        remote-fs.target) mount -a -t nfs4 -o retry=0 || log "WARN could not mount the shared filesystem" ;;
        *)
            if [ -f "/etc/systemd/system/$unit.service" ]; then
                exec_start=$(sed -n 's/^ExecStart=//p' "/etc/systemd/system/$unit.service")
                $exec_start  # our own oneshot units: a plain command line
                # As systemd does: a oneshot that RemainAfterExit stays "active"; others run on every start.
                if grep -qx 'RemainAfterExit=yes' "/etc/systemd/system/$unit.service"; then
                    touch "/run/provisioner/$unit.done"
                fi
            elif [ -x "/etc/init.d/${unit/nfs-server/nfs-kernel-server}" ]; then
                "/etc/init.d/${unit/nfs-server/nfs-kernel-server}" start
            else
                log "cannot start $unit without systemd"
                return 1
            fi ;;
    esac
} 9>&-  # the daemons it starts must not hold the bootstrap lock (fd 9), or no later run gets it

svc_stop() {
    local unit=${1%.service} pid i
    rm -f "/run/provisioner/$unit.done"
    pid=$(cat "$(pid_file "$unit")" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null || return 0
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
}

systemctl() {  # systemd when it runs; otherwise start the daemons directly
    if [ "$HAVE_SYSTEMD" = 1 ]; then
        command systemctl "$@"
        return
    fi
    local action=$1 now=0 unit units=()
    shift
    for unit in "$@"; do
        case $unit in --now) now=1 ;; -*) ;; *) units+=("$unit") ;; esac
    done
    for unit in "${units[@]}"; do
        case $action in
            enable) if [ "$now" = 1 ]; then svc_start "$unit" || return; fi ;;
            start) svc_start "$unit" || return ;;
            restart) svc_stop "$unit"; svc_start "$unit" || return ;;
            stop) svc_stop "$unit" ;;
            is-active) svc_running "${unit%.service}" || return ;;
            *) log "systemctl $action $unit: ignored without systemd" ;;
        esac
    done
}

begin_step() {  # ID ALWAYS: false when the step already succeeded on an earlier run
    if [ "$2" = 0 ] && [ -e "$STATE/$1.done" ]; then
        log "step $1: done earlier"
        return 1
    fi
    log "step $1"
}
end_step() { touch "$STATE/$1.done"; }
fail_step() {  # ID STATUS WARN_ONLY
    if [ "$3" = 1 ]; then
        log "step $1: WARN exit $2 (left to node validation)"
        touch "$STATE/$1.done"
    else
        log "step $1: FAILED exit $2 (run the bootstrap again to retry)"
        FAILED=1
    fi
}

log 'worker node of llm-pretrain,' "systemd: $HAVE_SYSTEMD"
if ! id -u ml >/dev/null 2>&1; then
    useradd -m -u 2000 -s /bin/bash ml
fi
for group in $(echo sudo | tr , ' '); do
    getent group "$group" >/dev/null && usermod -aG "$group" ml
done
if [ -d /etc/sudoers.d ]; then
    echo 'ml ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/90-provisioner-ml
    chmod 0440 /etc/sudoers.d/90-provisioner-ml
fi
authorize ml 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example'
authorize root 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example'
put_file /etc/provisioner/hostkey-token 0600 root:root <<'PROVISIONER_B64'
UFJPVklTSU9ORVJfSE9TVEtFWV9UT0tFTl9TTE9U
PROVISIONER_B64
put_file /etc/provisioner/firewall.nft 0644 root:root <<'PROVISIONER_B64'
IyEvdXNyL3NiaW4vbmZ0IC1mCiMgTm9kZSBmaXJld2FsbCBmb3IgY2x1c3RlciBsbG0tcHJldHJhaW4sIGNsb3NlZCBieSBkZWZhdWx0IChwb2xpY3kgZHJvcCk6IFNTSCBvbmx5IGZyb20KIyBhY2Nlc3MuYWxsb3dlZF9jaWRycyBhbmQgdGhlIGNsdXN0ZXIncyBvd24gbm9kZXM7IGV2ZXJ5dGhpbmcgZWxzZSAoU2x1cm0sIGszcywgTkZTLCBOQ0NMLCBzcnVuJ3MKIyBzdGVwIEkvTykgb25seSBmcm9tIHRoZSBjbHVzdGVyJ3Mgb3duIG5vZGVzOyBwbHVzIGxvb3BiYWNrLCByZXBsaWVzLAojIElDTVAgYW5kIERIQ1AuIE5vIHBvcnQgaXMgb3BlbiB0byB0aGUgSW50ZXJuZXQgYnV0IDIyIHRvIGFsbG93ZWRfY2lkcnMgKGszcydzIFRyYWVmaWsgYW5kCiMgU2VydmljZUxCIGFyZSBub3QgaW5zdGFsbGVkIHVubGVzcyBhc2tlZCkuIE9ubHkgcm9vdCBtYXkgcmVhY2ggdGhlIGluc3RhbmNlIG1ldGFkYXRhIGFkZHJlc3MKIyAxNjkuMjU0LjE2OS4yNTQgLyBmZDAwOmVjMjo6MjU0ICh1c2VyIGRhdGEsIGNyZWRlbnRpYWxzKTogam9icyBhbmQgcG9kcyBhcmUgZHJvcHBlZCB0aGVyZS4KIyBUaGUgbm9kZSBhZGRyZXNzZXMgYXJlIGFkZGVkIGF0IGJvb3QgYnkgcHJvdmlzaW9uZXItZmlyZXdhbGwgZnJvbSAvZXRjL3Byb3Zpc2lvbmVyL2hvc3RzICh0aGUKIyBjbHVzdGVyIHNldHMgYmVsb3cgaG9sZCBvbmx5IHdoYXQgaXMga25vd24gYmVmb3JlIGJvb3QpLiBMb2FkaW5nIHRoaXMgZmlsZSBhZ2FpbiByZXBsYWNlcyB0aGUKIyB0YWJsZSBhdG9taWNhbGx5IChpZGVtcG90ZW50KS4gUHJvdG9jb2xzIGFyZSBudW1iZXJzICgxIElDTVAsIDU4IElDTVB2Nik6IGEgbWluaW1hbCBpbWFnZSBoYXMgbm8KIyAvZXRjL3Byb3RvY29scyB0byByZXNvbHZlIG5hbWVzLCBhbmQgYSBydWxlc2V0IHRoYXQgZmFpbHMgdG8gbG9hZCBwcm90ZWN0cyBub3RoaW5nLgp0YWJsZSBpbmV0IHByb3Zpc2lvbmVyCmRlbGV0ZSB0YWJsZSBpbmV0IHByb3Zpc2lvbmVyCnRhYmxlIGluZXQgcHJvdmlzaW9uZXIgewogICAgc2V0IHNzaF92NCB7CiAgICAgICAgdHlwZSBpcHY0X2FkZHIKICAgICAgICBmbGFncyBpbnRlcnZhbAogICAgfQogICAgc2V0IHNzaF92NiB7CiAgICAgICAgdHlwZSBpcHY2X2FkZHIKICAgICAgICBmbGFncyBpbnRlcnZhbAogICAgfQogICAgc2V0IGNsdXN0ZXJfdjQgewogICAgICAgIHR5cGUgaXB2NF9hZGRyCiAgICAgICAgZmxhZ3MgaW50ZXJ2YWwKICAgIH0KICAgIHNldCBjbHVzdGVyX3Y2IHsKICAgICAgICB0eXBlIGlwdjZfYWRkcgogICAgICAgIGZsYWdzIGludGVydmFsCiAgICB9CiAgICBjaGFpbiBpbnB1dCB7CiAgICAgICAgdHlwZSBmaWx0ZXIgaG9vayBpbnB1dCBwcmlvcml0eSBmaWx0ZXI7IHBvbGljeSBkcm9wOwogICAgICAgIGlpZiAibG8iIGFjY2VwdAogICAgICAgIGN0IHN0YXRlIGVzdGFibGlzaGVkLHJlbGF0ZWQgYWNjZXB0CiAgICAgICAgY3Qgc3RhdGUgaW52YWxpZCBkcm9wCiAgICAgICAgbWV0YSBsNHByb3RvIHsgMSwgNTggfSBhY2NlcHQKICAgICAgICB1ZHAgc3BvcnQgNjcgdWRwIGRwb3J0IDY4IGFjY2VwdAogICAgICAgIHVkcCBzcG9ydCA1NDcgdWRwIGRwb3J0IDU0NiBhY2NlcHQKICAgICAgICB0Y3AgZHBvcnQgMjIgaXAgc2FkZHIgQHNzaF92NCBhY2NlcHQKICAgICAgICB0Y3AgZHBvcnQgMjIgaXA2IHNhZGRyIEBzc2hfdjYgYWNjZXB0CiAgICAgICAgaXAgc2FkZHIgQGNsdXN0ZXJfdjQgYWNjZXB0CiAgICAgICAgaXA2IHNhZGRyIEBjbHVzdGVyX3Y2IGFjY2VwdAogICAgICAgIGNvdW50ZXIgZHJvcAogICAgfQogICAgY2hhaW4gb3V0cHV0IHsKICAgICAgICB0eXBlIGZpbHRlciBob29rIG91dHB1dCBwcmlvcml0eSBmaWx0ZXI7IHBvbGljeSBhY2NlcHQ7CiAgICAgICAgaXAgZGFkZHIgMTY5LjI1NC4xNjkuMjU0IG1ldGEgc2t1aWQgIT0gMCBjb3VudGVyIGRyb3AKICAgICAgICBpcDYgZGFkZHIgZmQwMDplYzI6OjI1NCBtZXRhIHNrdWlkICE9IDAgY291bnRlciBkcm9wCiAgICB9CiAgICBjaGFpbiBmb3J3YXJkIHsKICAgICAgICB0eXBlIGZpbHRlciBob29rIGZvcndhcmQgcHJpb3JpdHkgZmlsdGVyOyBwb2xpY3kgYWNjZXB0OwogICAgICAgIGlwIGRhZGRyIDE2OS4yNTQuMTY5LjI1NCBjb3VudGVyIGRyb3AKICAgICAgICBpcDYgZGFkZHIgZmQwMDplYzI6OjI1NCBjb3VudGVyIGRyb3AKICAgIH0KfQo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-firewall 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBwcm92aXNpb25lci1maXJld2FsbDogYXBwbHkgdGhlIG5vZGUgbGlzdCBvZiBjbHVzdGVyIGxsbS1wcmV0cmFpbiAoL2V0Yy9wcm92aXNpb25lci9ob3N0cywgIklQIE5BTUUiIGxpbmVzKS4KIyAtIHRoZSBub2RlIGZpcmV3YWxsOiAvZXRjL3Byb3Zpc2lvbmVyL2ZpcmV3YWxsLm5mdCBwbHVzIGV2ZXJ5IG5vZGUgYWRkcmVzcyBpbiB0aGUgY2x1c3RlciBzZXRzLCBvbmUgbmZ0IHRyYW5zYWN0aW9uOwojIC0gdGhlIG5vZGUgbmFtZXMgaW4gL2V0Yy9ob3N0cyAob25lIG1hcmtlZCBibG9jaywgcmVwbGFjZWQpLgojIFVudGlsIHRoZSBsaXN0IGV4aXN0cyB0aGUgY2x1c3RlciBzZXRzIGhvbGQgbm90aGluZyAoZGFlbW9ucyBhbnN3ZXIgdGhpcyBub2RlIG9ubHkpLgojIElkZW1wb3RlbnQ7IHJ1biBhZ2FpbiB3aGVuZXZlciB0aGUgbGlzdCBjaGFuZ2VzIChwcm92aXNpb25lci1maXJld2FsbC5wYXRoKS4gT25seSBhZGRyZXNzLXNoYXBlZAojIHdvcmRzIGZyb20gdGhlIGxpc3QgYXJlIHVzZWQuIFByZWZpeCBldmVyeSBwYXRoIHdpdGggJFBST1ZJU0lPTkVSX1JPT1QgKHRlc3RzKS4Kc2V0IC1ldW8gcGlwZWZhaWwKUk9PVD0ke1BST1ZJU0lPTkVSX1JPT1Q6LX0KSE9TVFM9JFJPT1QvZXRjL3Byb3Zpc2lvbmVyL2hvc3RzCnY0PSgpIHY2PSgpIG5hbWVzPSgpCmlmIFsgLXIgIiRIT1NUUyIgXTsgdGhlbgogICAgd2hpbGUgcmVhZCAtciBhZGRyIG5hbWUgXzsgZG8KICAgICAgICBjYXNlICRhZGRyIGluICcnIHwgJyMnKikgY29udGludWUgOzsgZXNhYwogICAgICAgIGlmIFtbICRhZGRyID1+IF5bMC05XXsxLDN9KFwuWzAtOV17MSwzfSl7M30kIF1dOyB0aGVuCiAgICAgICAgICAgIHY0Kz0oIiRhZGRyIikKICAgICAgICBlbGlmIFtbICRhZGRyID1+IF5bMC05QS1GYS1mOi5dezIsNDV9JCAmJiAkYWRkciA9PSAqOiogXV07IHRoZW4KICAgICAgICAgICAgdjYrPSgiJGFkZHIiKQogICAgICAgIGVsc2UKICAgICAgICAgICAgZWNobyAicHJvdmlzaW9uZXItZmlyZXdhbGw6IGlnbm9yaW5nIGEgbGluZSBvZiAkSE9TVFMgd2hvc2UgZmlyc3Qgd29yZCBpcyBub3QgYW4gSVAgYWRkcmVzcyIgPiYyCiAgICAgICAgICAgIGNvbnRpbnVlCiAgICAgICAgZmkKICAgICAgICBpZiBbWyAke25hbWU6LX0gPX4gXltBLVphLXowLTldW0EtWmEtejAtOS4tXXswLDYyfSQgXV07IHRoZW4gbmFtZXMrPSgiJGFkZHIgJG5hbWUiKTsgZmkKICAgIGRvbmUgPCAiJEhPU1RTIgplbHNlCiAgICBlY2hvICJwcm92aXNpb25lci1maXJld2FsbDogbm8gJEhPU1RTIHlldDsgY2x1c3RlciBkYWVtb25zIGFuc3dlciB0aGlzIG5vZGUgb25seSB1bnRpbCBpdCBhcHBlYXJzIiA+JjIKZmkKam9pbigpIHsgbG9jYWwgSUZTPSw7IGVjaG8gIiQqIjsgfQpzdGF0dXM9MAppZiAhIG91dD0kKHsKICAgIGNhdCAiJFJPT1QvZXRjL3Byb3Zpc2lvbmVyL2ZpcmV3YWxsLm5mdCIKICAgIGlmIFsgLW4gIiR7djRbKl06LX0iIF07IHRoZW4gZWNobyAiYWRkIGVsZW1lbnQgaW5ldCBwcm92aXNpb25lciBjbHVzdGVyX3Y0IHsgJChqb2luICIke3Y0W0BdfSIpIH0iOyBmaQogICAgaWYgWyAtbiAiJHt2NlsqXTotfSIgXTsgdGhlbiBlY2hvICJhZGQgZWxlbWVudCBpbmV0IHByb3Zpc2lvbmVyIGNsdXN0ZXJfdjYgeyAkKGpvaW4gIiR7djZbQF19IikgfSI7IGZpCn0gfCBuZnQgLWYgLSAyPiYxKTsgdGhlbgogICAgaWYgW1sgJG91dCA9PSAqIk9wZXJhdGlvbiBub3QgcGVybWl0dGVkIiogXV07IHRoZW4KICAgICAgICAjIEEgY29udGFpbmVyIHdpdGhvdXQgQ0FQX05FVF9BRE1JTiAoUnVuUG9kLCBWYXN0LmFpIHBvZHMpOiBubyBub2RlIGZpcmV3YWxsIGlzIHBvc3NpYmxlIHRoZXJlOwogICAgICAgICMgdGhlIHByb3ZpZGVyJ3MgcG9ydCBtYXBwaW5nIGlzIHRoZSBvbmx5IGJvdW5kYXJ5LiBTYWlkIGxvdWRseTsgdGhlIHJlc3Qgc3RpbGwgYXBwbGllcy4KICAgICAgICBlY2hvICJwcm92aXNpb25lci1maXJld2FsbDogV0FSTklORyBjYW5ub3QgbG9hZCBuZnRhYmxlcyBoZXJlIChubyBDQVBfTkVUX0FETUlOKTogb25seSB0aGUgcHJvdmlkZXIncyBvd24gZmlyZXdhbGwgb3IgcG9ydCBtYXBwaW5nIHByb3RlY3RzIHRoaXMgbm9kZSIgPiYyCiAgICBlbHNlCiAgICAgICAgZWNobyAicHJvdmlzaW9uZXItZmlyZXdhbGw6IEZBSUxFRCB0byBsb2FkIHRoZSBub2RlIGZpcmV3YWxsOiAkb3V0IiA+JjIKICAgICAgICBzdGF0dXM9MQogICAgZmkKZmkKaWYgWyAtbiAiJHtuYW1lc1sqXTotfSIgXTsgdGhlbgogICAgZXRjX2hvc3RzPSRST09UL2V0Yy9ob3N0cwogICAgewogICAgICAgIHNlZCAnL14jIHByb3Zpc2lvbmVyIGhvc3RzIGJlZ2luJC8sL14jIHByb3Zpc2lvbmVyIGhvc3RzIGVuZCQvZCcgIiRldGNfaG9zdHMiIDI+IC9kZXYvbnVsbCB8fCB0cnVlCiAgICAgICAgZWNobyAnIyBwcm92aXNpb25lciBob3N0cyBiZWdpbicKICAgICAgICBwcmludGYgJyVzXG4nICIke25hbWVzW0BdfSIKICAgICAgICBlY2hvICcjIHByb3Zpc2lvbmVyIGhvc3RzIGVuZCcKICAgIH0gPiAiJGV0Y19ob3N0cy5wcm92aXNpb25lciIKICAgIGNhdCAiJGV0Y19ob3N0cy5wcm92aXNpb25lciIgPiAiJGV0Y19ob3N0cyIgICMgaW4gcGxhY2U6IGEgY29udGFpbmVyJ3MgL2V0Yy9ob3N0cyBpcyBhIGJpbmQgbW91bnQKICAgIHJtIC1mICIkZXRjX2hvc3RzLnByb3Zpc2lvbmVyIgpmaQplY2hvICJwcm92aXNpb25lci1maXJld2FsbDogbm9kZSBhZGRyZXNzZXMgYXBwbGllZDogJHt2NFsqXTotfSAke3Y2WypdOi19IgpleGl0ICIkc3RhdHVzIgo=
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-firewall.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPU5vZGUgZmlyZXdhbGwsIE5GUyBleHBvcnRzIGFuZCBub2RlIG5hbWVzIG9mIHRoZSBjbHVzdGVyIGZyb20gL2V0Yy9wcm92aXNpb25lci9ob3N0cwpXYW50cz1uZXR3b3JrLXByZS50YXJnZXQKQmVmb3JlPW5ldHdvcmstcHJlLnRhcmdldCBzc2guc2VydmljZSBzbHVybWQuc2VydmljZSBzbHVybWN0bGQuc2VydmljZSBrM3Muc2VydmljZSBrM3MtYWdlbnQuc2VydmljZSBuZnMtc2VydmVyLnNlcnZpY2UKW1NlcnZpY2VdClR5cGU9b25lc2hvdApFeGVjU3RhcnQ9L3Vzci9sb2NhbC9zYmluL3Byb3Zpc2lvbmVyLWZpcmV3YWxsCltJbnN0YWxsXQpXYW50ZWRCeT1tdWx0aS11c2VyLnRhcmdldAo=
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-firewall.path 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUFwcGx5IHRoZSBjbHVzdGVyJ3Mgbm9kZSBsaXN0IGFnYWluIHdoZW5ldmVyIC9ldGMvcHJvdmlzaW9uZXIvaG9zdHMgY2hhbmdlcwpbUGF0aF0KUGF0aENoYW5nZWQ9L2V0Yy9wcm92aXNpb25lci9ob3N0cwpVbml0PXByb3Zpc2lvbmVyLWZpcmV3YWxsLnNlcnZpY2UKW0luc3RhbGxdCldhbnRlZEJ5PW11bHRpLXVzZXIudGFyZ2V0Cg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-identity 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBXb3JrIG91dCB3aGljaCBub2RlIG9mIGNsdXN0ZXIgbGxtLXByZXRyYWluIHRoaXMgbWFjaGluZSBpcywgZnJvbSB0aGUgcHJvdmlkZXIncyBtZXRhZGF0YQojICh0aGUgaW5zdGFuY2UgbmFtZSB0aGUgc3RhY2sgZ2F2ZSBpdCksIHNldCB0aGUgaG9zdG5hbWUgdG8gaXQgYW5kIHJlY29yZCBpdCBpbgojIC9ldGMvcHJvdmlzaW9uZXIvaWRlbnRpdHkuZW52LiBQUk9WSVNJT05FUl9OT0RFX05BTUUgKHNldCBieSB0aGUgc3RhY2sgd2hlcmUgdGhlIHByb3ZpZGVyIGhhcwojIG5vIGluc3RhbmNlLW5hbWUgbWV0YWRhdGEsIGUuZy4gYSBjb250YWluZXIgcG9kJ3MgZW52aXJvbm1lbnQpIHdpbnM7IGZhbGxzIGJhY2sgdG8gdGhlIGN1cnJlbnQKIyBzaG9ydCBob3N0bmFtZS4Kc2V0IC11ClBSRUZJWD1sbG0tcHJldHJhaW4tClJPT1Q9JHtQUk9WSVNJT05FUl9ST09UOi19CmlzX25vZGUoKSB7IFtbICIkMSIgPT0gIiRQUkVGSVgiKiAmJiAiJHsxIyIkUFJFRklYIn0iID1+IF5bMC05XSskIF1dOyB9CiMgQWRhcHRlcnMgbWF5IG5hbWUgdGhlIGluc3RhbmNlICI8Y2x1c3Rlcj4tPG5vZGU+IiAoZS5nLiBsbG0tcHJldHJhaW4tbGxtLXByZXRyYWluLTApOiBrZWVwIHRoZSBub2RlLgpub2RlX29mKCkgeyBsb2NhbCB0YWlsPSR7MSMjKiIkUFJFRklYIn07IFtbICIkMSIgPT0gKiIkUFJFRklYIiogJiYgJHRhaWwgPX4gXlswLTldKyQgXV0gJiYgZWNobyAiJFBSRUZJWCR0YWlsIjsgfQpuYW1lPSIke1BST1ZJU0lPTkVSX05PREVfTkFNRTotfSIKaWYgWyAteiAiJG5hbWUiIF07IHRoZW4KICAgIHRva2VuPSQoY3VybCAtc2YgLW0gNSAtWCBQVVQgaHR0cDovLzE2OS4yNTQuMTY5LjI1NC9sYXRlc3QvYXBpL3Rva2VuIC1IICJYLWF3cy1lYzItbWV0YWRhdGEtdG9rZW4tdHRsLXNlY29uZHM6IDYwIiB8fCB0cnVlKQogICAgbmFtZT0kKGN1cmwgLXNmIC1tIDUgLUggIlgtYXdzLWVjMi1tZXRhZGF0YS10b2tlbjogJHRva2VuIiBodHRwOi8vMTY5LjI1NC4xNjkuMjU0L2xhdGVzdC9tZXRhLWRhdGEvdGFncy9pbnN0YW5jZS9OYW1lIHx8IHRydWUpCmZpCm5hbWU9JChub2RlX29mICIkbmFtZSIgfHwgdHJ1ZSkKaWYgISBpc19ub2RlICIkbmFtZSI7IHRoZW4KICAgIG5hbWU9JChub2RlX29mICIkKGhvc3RuYW1lIC1zKSIgfHwgdHJ1ZSkKZmkKaWYgISBpc19ub2RlICIkbmFtZSI7IHRoZW4KICAgIGVjaG8gInByb3Zpc2lvbmVyLWlkZW50aXR5OiBjYW5ub3QgdGVsbCB3aGljaCBub2RlIHRoaXMgaXMgKGdvdCAnJHtQUk9WSVNJT05FUl9OT0RFX05BTUU6LX0nIC8gJyQoaG9zdG5hbWUgLXMpJykiID4mMgogICAgZXhpdCAxCmZpCmhvc3RuYW1lY3RsIHNldC1ob3N0bmFtZSAiJG5hbWUiIDI+L2Rldi9udWxsIHx8IGhvc3RuYW1lICIkbmFtZSIKcm9sZT13b3JrZXIKWyAiJG5hbWUiID0gbGxtLXByZXRyYWluLTAgXSAmJiByb2xlPWhlYWQKbWtkaXIgLXAgIiRST09UL2V0Yy9wcm92aXNpb25lciIKcHJpbnRmICdOT0RFX05BTUU9JXNcbk5PREVfUk9MRT0lc1xuSEVBRF9OT0RFPSVzXG4nICIkbmFtZSIgIiRyb2xlIiBsbG0tcHJldHJhaW4tMCA+ICIkUk9PVC9ldGMvcHJvdmlzaW9uZXIvaWRlbnRpdHkuZW52IgojIFRoZSBvdGhlciBub2RlcycgbmFtZXMgKC9ldGMvcHJvdmlzaW9uZXIvaG9zdHMpIHJlYWNoIC9ldGMvaG9zdHMgdGhyb3VnaCBwcm92aXNpb25lci1maXJld2FsbC4KZWNobyAicHJvdmlzaW9uZXItaWRlbnRpdHk6ICRuYW1lICgkcm9sZSkiCg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-nvme-raid 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBBc3NlbWJsZSBldmVyeSBsb2NhbCBOVk1lIGRhdGEgZGlzayBpbnRvIG9uZSBmaWxlc3lzdGVtIGF0IC9tbnQvY2hlY2twb2ludHMuCiMgICAwIGRpc2tzOiBhIGRpcmVjdG9yeSBvbiB0aGUgcm9vdCBkaXNrICh3aXRoIGEgd2FybmluZyk7IDEgZGlzazogZm9ybWF0dGVkIGRpcmVjdGx5OwojICAgTiBkaXNrczogbWRhZG0gUkFJRDAgKC9kZXYvbWQvY2hlY2twb2ludHMpLiBJZGVtcG90ZW50OiBhbiBleGlzdGluZyBtb3VudCBvciBhcnJheSBpcyByZXVzZWQuCiMgVGVzdCBob29rcyAodXNlZCBieSB0aGUgdW5pdCB0ZXN0cywgaGFybWxlc3MgaW4gcHJvZHVjdGlvbik6CiMgICBQUk9WSVNJT05FUl9OVk1FX0RFVklDRVMgIHNwYWNlLXNlcGFyYXRlZCBjYW5kaWRhdGUgZGlza3MgaW5zdGVhZCBvZiBsc2JsayBkaXNjb3ZlcnkKIyAgIFBST1ZJU0lPTkVSX1JPT1RfRElTSyAgICAgdGhlIHJvb3QgZGlzayBpbnN0ZWFkIG9mIGFza2luZyBmaW5kbW50L2xzYmxrCiMgICBQUk9WSVNJT05FUl9EUllfUlVOPTEgICAgIHByaW50IHRoZSBjb21tYW5kcyBpbnN0ZWFkIG9mIHJ1bm5pbmcgdGhlbQpzZXQgLWV1byBwaXBlZmFpbApNT1VOVF9QT0lOVD0ke1BST1ZJU0lPTkVSX01PVU5UX1BPSU5UOi19ClsgLW4gIiRNT1VOVF9QT0lOVCIgXSB8fCBNT1VOVF9QT0lOVD0vbW50L2NoZWNrcG9pbnRzCk1EX0RFVklDRT0vZGV2L21kL2NoZWNrcG9pbnRzCgpydW4oKSB7CiAgICBpZiBbICIke1BST1ZJU0lPTkVSX0RSWV9SVU46LTB9IiA9IDEgXTsgdGhlbiBlY2hvICIrICQqIjsgZWxzZSAiJEAiOyBmaQp9Cgpyb290X2Rpc2soKSB7CiAgICBpZiBbIC1uICIke1BST1ZJU0lPTkVSX1JPT1RfRElTSzotfSIgXTsgdGhlbiBlY2hvICIkUFJPVklTSU9ORVJfUk9PVF9ESVNLIjsgcmV0dXJuOyBmaQogICAgbG9jYWwgc3JjIHBhcmVudAogICAgc3JjPSQoZmluZG1udCAtbm8gU09VUkNFIC8gfHwgdHJ1ZSkKICAgIHBhcmVudD0kKGxzYmxrIC1ubyBQS05BTUUgIiRzcmMiIDI+L2Rldi9udWxsIHwgaGVhZCAtbiAxIHx8IHRydWUpCiAgICBpZiBbIC1uICIkcGFyZW50IiBdOyB0aGVuIGVjaG8gIi9kZXYvJHBhcmVudCI7IGVsc2UgZWNobyAiJHNyYyI7IGZpCn0KCmNhbmRpZGF0ZXMoKSB7CiAgICBpZiBbIC1uICIke1BST1ZJU0lPTkVSX05WTUVfREVWSUNFUytzZXR9IiBdOyB0aGVuCiAgICAgICAgZm9yIGRldiBpbiAkUFJPVklTSU9ORVJfTlZNRV9ERVZJQ0VTOyBkbyBlY2hvICIkZGV2IjsgZG9uZQogICAgICAgIHJldHVybgogICAgZmkKICAgICMgV2hvbGUgTlZNZSBkaXNrcyB3aXRoIG5vIHBhcnRpdGlvbnMgYW5kIG5vIGZpbGVzeXN0ZW0gbW91bnRlZCBmcm9tIHRoZW0uCiAgICBsc2JsayAtZHBubyBOQU1FLFRZUEUgfCBhd2sgJyQyID09ICJkaXNrIiAmJiAkMSB+IC9cL252bWVbMC05XStuWzAtOV0rJC8ge3ByaW50ICQxfScgfCB3aGlsZSByZWFkIC1yIGRldjsgZG8KICAgICAgICBpZiBbICIkKGxzYmxrIC1ubyBOQU1FICIkZGV2IiB8IHdjIC1sKSIgLWVxIDEgXSAmJiBbIC16ICIkKGxzYmxrIC1ubyBNT1VOVFBPSU5UICIkZGV2IiB8IHRyIC1kICdbOnNwYWNlOl0nKSIgXTsgdGhlbgogICAgICAgICAgICBlY2hvICIkZGV2IgogICAgICAgIGZpCiAgICBkb25lCn0KCmlmIFsgIiR7UFJPVklTSU9ORVJfRFJZX1JVTjotMH0iICE9IDEgXSAmJiBtb3VudHBvaW50IC1xICIkTU9VTlRfUE9JTlQiOyB0aGVuCiAgICBlY2hvICJudm1lLXJhaWQ6ICRNT1VOVF9QT0lOVCBhbHJlYWR5IG1vdW50ZWQiCiAgICBleGl0IDAKZmkKClJPT1Q9JChyb290X2Rpc2spCkRJU0tTPSgpCkNPVU5UPTAKZm9yIGRldiBpbiAkKGNhbmRpZGF0ZXMpOyBkbwogICAgaWYgWyAiJGRldiIgPSAiJFJPT1QiIF07IHRoZW4gY29udGludWU7IGZpCiAgICBESVNLUys9KCIkZGV2IikKICAgIENPVU5UPSQoKENPVU5UICsgMSkpCmRvbmUKCnJ1biBta2RpciAtcCAiJE1PVU5UX1BPSU5UIgpjYXNlICRDT1VOVCBpbgogICAgMCkKICAgICAgICBlY2hvICJudm1lLXJhaWQ6IFdBUk5JTkc6IG5vIGxvY2FsIE5WTWUgZGF0YSBkaXNrOyAkTU9VTlRfUE9JTlQgaXMgb24gdGhlIHJvb3QgZGlzayIgPiYyCiAgICAgICAgZXhpdCAwCiAgICAgICAgOzsKICAgIDEpCiAgICAgICAgVEFSR0VUPSIke0RJU0tTWzBdfSIKICAgICAgICA7OwogICAgKikKICAgICAgICBpZiBbICIke1BST1ZJU0lPTkVSX0RSWV9SVU46LTB9IiAhPSAxIF0gJiYgWyAtZSAiJE1EX0RFVklDRSIgXTsgdGhlbgogICAgICAgICAgICBUQVJHRVQ9IiRNRF9ERVZJQ0UiCiAgICAgICAgZWxzZQogICAgICAgICAgICBydW4gbWRhZG0gLS1jcmVhdGUgIiRNRF9ERVZJQ0UiIC0tcnVuIC0tbGV2ZWw9MCAtLWNodW5rPTUxMiAtLXJhaWQtZGV2aWNlcz0kQ09VTlQgIiR7RElTS1NbQF19IgogICAgICAgICAgICBUQVJHRVQ9IiRNRF9ERVZJQ0UiCiAgICAgICAgZmkKICAgICAgICA7Owplc2FjCmVjaG8gIm52bWUtcmFpZDogJENPVU5UIGRpc2socyk6ICR7RElTS1NbKl19IC0+ICRUQVJHRVQiCmlmIFsgIiR7UFJPVklTSU9ORVJfRFJZX1JVTjotMH0iID0gMSBdIHx8ICEgYmxraWQgLW8gdmFsdWUgLXMgVFlQRSAiJFRBUkdFVCIgPi9kZXYvbnVsbCAyPiYxOyB0aGVuCiAgICBydW4gbWtmcy5leHQ0IC1GIC1xIC1MIGNoZWNrcG9pbnRzIC1FIGxhenlfaXRhYmxlX2luaXQ9MSxsYXp5X2pvdXJuYWxfaW5pdD0xIC1tIDAgIiRUQVJHRVQiCmZpCnJ1biBtb3VudCAtbyBub2F0aW1lLGRpc2NhcmQgIiRUQVJHRVQiICIkTU9VTlRfUE9JTlQiCnJ1biBjaG1vZCAxNzc3ICIkTU9VTlRfUE9JTlQiCg==
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-nvme.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUFzc2VtYmxlIGxvY2FsIE5WTWUgaW50byAvbW50L2NoZWNrcG9pbnRzCkJlZm9yZT1zbHVybWQuc2VydmljZSBrM3Muc2VydmljZSBrM3MtYWdlbnQuc2VydmljZSBuZnMtc2VydmVyLnNlcnZpY2UKW1NlcnZpY2VdClR5cGU9b25lc2hvdApSZW1haW5BZnRlckV4aXQ9eWVzCkV4ZWNTdGFydD0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItbnZtZS1yYWlkCltJbnN0YWxsXQpXYW50ZWRCeT1tdWx0aS11c2VyLnRhcmdldAo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-gpu-check 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBQcmVzZW5jZSBjaGVja3MgZm9yIHRoZSBHUFUgc3RhY2ssIGxvZ2dlZCB0byAvdmFyL2xvZy9wcm92aXNpb25lci9ncHUtY2hlY2subG9nLgojIEV4aXQgMSBvbiBhIG1pc3NpbmcgZHJpdmVyLCBhIHdyb25nIEdQVSBjb3VudCwgKDgtR1BVIFNYTSBib2FyZHMpIGEgc3RvcHBlZCBmYWJyaWMgbWFuYWdlcgojIG9yIChLdWJlcm5ldGVzKSBubyBOVklESUEgY29udGFpbmVyIHJ1bnRpbWU7IGxhdGVyIG5vZGUgdmFsaWRhdGlvbiBkcmFpbnMgc3VjaCBhIG5vZGUKIyByYXRoZXIgdGhhbiB0aGlzIGJvb3Qgc2NyaXB0LgpzZXQgLXUKbWtkaXIgLXAgL3Zhci9sb2cvcHJvdmlzaW9uZXIKZXhlYyA+ID4odGVlIC1hIC92YXIvbG9nL3Byb3Zpc2lvbmVyL2dwdS1jaGVjay5sb2cpIDI+JjEKc3RhdHVzPTAKaWYgISBjb21tYW5kIC12IG52aWRpYS1zbWkgPi9kZXYvbnVsbDsgdGhlbgogICAgZWNobyAiZ3B1LWNoZWNrOiBGQUlMIG52aWRpYS1zbWkgbm90IGZvdW5kIChubyBOVklESUEgZHJpdmVyIG9uIHRoZSBpbWFnZSkiCiAgICBleGl0IDEKZmkKY291bnQ9JChudmlkaWEtc21pIC1MIDI+L2Rldi9udWxsIHwgZ3JlcCAtYyAnXkdQVSAnIHx8IHRydWUpCmlmIFsgIiRjb3VudCIgLW5lIDggXTsgdGhlbgogICAgZWNobyAiZ3B1LWNoZWNrOiBGQUlMIGZvdW5kICRjb3VudCBHUFUocyksIGV4cGVjdGVkIDggeCIgSDEwMAogICAgc3RhdHVzPTEKZWxzZQogICAgZWNobyAiZ3B1LWNoZWNrOiBvayAkY291bnQgR1BVKHMpIgpmaQojIDgtR1BVIE5WU3dpdGNoIGJvYXJkcyBuZWVkIG52aWRpYS1mYWJyaWNtYW5hZ2VyIG9yIENVREEgaW5pdCBmYWlscyB3aXRoIGVycm9yIDgwMi4KaWYgISBzeXN0ZW1jdGwgaXMtYWN0aXZlIC0tcXVpZXQgbnZpZGlhLWZhYnJpY21hbmFnZXI7IHRoZW4KICAgIHN5c3RlbWN0bCBlbmFibGUgLS1ub3cgbnZpZGlhLWZhYnJpY21hbmFnZXIgfHwgdHJ1ZQpmaQppZiBzeXN0ZW1jdGwgaXMtYWN0aXZlIC0tcXVpZXQgbnZpZGlhLWZhYnJpY21hbmFnZXI7IHRoZW4KICAgIGVjaG8gImdwdS1jaGVjazogb2sgbnYtZmFicmljbWFuYWdlciBhY3RpdmUiCmVsc2UKICAgIGVjaG8gImdwdS1jaGVjazogRkFJTCBudi1mYWJyaWNtYW5hZ2VyIGlzIG5vdCBydW5uaW5nIgogICAgc3RhdHVzPTEKZmkKIyBOb2RlIHZhbGlkYXRpb24gKGRvY3MvdmFsaWRhdGlvbi5tZCkgd2hlcmUgdGhlIGltYWdlIGhhcyB0aGUgcHJvdmlzaW9uZXIgcGFja2FnZTogR1BVIGhlYWx0aCwKIyBYSURzLCBOVkxpbmssIERDR00gYW5kIGEgfjY1IHMgYnVybi1pbiwgYmVmb3JlIHNsdXJtZC9rM3Mgc3RhcnQuIEZhaWxlZCAoZXhpdCAxMSkgZmFpbHMgdGhpcwojIGNoZWNrOyBkZWdyYWRlZCAoMTApIGlzIGxvZ2dlZCBhbmQgbGVmdCB0byBgcHJvdmlzaW9uZXIgdmFsaWRhdGVgLiBJbWFnZXMgd2l0aG91dCB0aGUgcGFja2FnZQojIGtlZXAgdGhlIHByZXNlbmNlIGNoZWNrcyBhYm92ZSBvbmx5LgppZiBjb21tYW5kIC12IHByb3Zpc2lvbmVyID4vZGV2L251bGw7IHRoZW4KICAgIHByb3Zpc2lvbmVyIG5vZGUgY2hlY2sgLS1leHBlY3QtZ3B1cyA4IC0tZXhwZWN0LW1vZGVsIEgxMDAgXAogICAgICAgIC0tanNvbiAtbyAvdmFyL2xvZy9wcm92aXNpb25lci9ub2RlLWNoZWNrLmpzb24KICAgIGNhc2UgJD8gaW4KICAgICAgICAwKSBlY2hvICJncHUtY2hlY2s6IG9rIG5vZGUgY2hlY2sgaGVhbHRoeSIgOzsKICAgICAgICAxMCkgZWNobyAiZ3B1LWNoZWNrOiBXQVJOIG5vZGUgY2hlY2sgZGVncmFkZWQgKC92YXIvbG9nL3Byb3Zpc2lvbmVyL25vZGUtY2hlY2suanNvbikiIDs7CiAgICAgICAgKikgZWNobyAiZ3B1LWNoZWNrOiBGQUlMIG5vZGUgY2hlY2sgZmFpbGVkICgvdmFyL2xvZy9wcm92aXNpb25lci9ub2RlLWNoZWNrLmpzb24pIjsgc3RhdHVzPTEgOzsKICAgIGVzYWMKZmkKZXhpdCAkc3RhdHVzCg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-health 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBOb2RlIGhlYWx0aCB3YXRjaCAoZG9jcy9oZWFsaW5nLm1kKTogYHByb3Zpc2lvbmVyIG5vZGUgd2F0Y2hgIGV2ZXJ5IDMwIHMsIHRoZSBjaGVja3Mgb2YKIyBgbm9kZSBjaGVjayAtLW5vLWJ1cm5pbmAgKG9uZSBpbXBsZW1lbnRhdGlvbik7IG9uIGEgZmFpbGVkIGZpbmRpbmcgaXQgZHJhaW5zIHRoaXMgbm9kZSB3aXRoIHRoZQojIGZpbmRpbmcncyBjb2RlLCBuZXZlciB0aGUgbGFzdCBub2RlIGluIHNlcnZpY2UuIFJlcG9ydHM6IC92YXIvbGliL3Byb3Zpc2lvbmVyL2hlYWx0aC9OT0RFLmpzb24uCiMgSW1hZ2VzIHdpdGhvdXQgdGhlIHByb3Zpc2lvbmVyIHBhY2thZ2UgZ2V0IG5vIHdhdGNoIChzYWlkIG9uY2UsIGhlcmUsIHRoZW4gaWRsZSkuCnNldCAtdQpta2RpciAtcCAvdmFyL2xvZy9wcm92aXNpb25lciAvdmFyL2xpYi9wcm92aXNpb25lci9oZWFsdGgKaWYgISBjb21tYW5kIC12IHByb3Zpc2lvbmVyID4vZGV2L251bGw7IHRoZW4KICAgIGVjaG8gInByb3Zpc2lvbmVyLWhlYWx0aDogdGhlIHByb3Zpc2lvbmVyIHBhY2thZ2UgaXMgbm90IG9uIHRoaXMgaW1hZ2U7IG5vIGhlYWx0aCB3YXRjaCBvbiB0aGlzIG5vZGUiCiAgICBleGVjIHNsZWVwIGluZmluaXR5CmZpCi4gL2V0Yy9wcm92aXNpb25lci9pZGVudGl0eS5lbnYKZXhlYyBwcm92aXNpb25lciBub2RlIHdhdGNoIC0tbm9kZSAiJE5PREVfTkFNRSIgLS12aWEgc2x1cm0gXAogICAgLS1pbnRlcnZhbC1zIDMwIC0tZXhwZWN0LWdwdXMgOCAtLWV4cGVjdC1tb2RlbCBIMTAwIFwKICAgIC0tc3BvdCBub25lIFwKICAgIC0tcmVwb3J0LWRpciAvdmFyL2xpYi9wcm92aXNpb25lci9oZWFsdGgK
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-health.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPU5vZGUgaGVhbHRoIHdhdGNoIChkcmFpbnMgdGhpcyBub2RlIG9uIGEgZmFpbGVkIEdQVSBmaW5kaW5nIG9yIGEgc3BvdCByZWNsYWltIG5vdGljZSkKQWZ0ZXI9c2x1cm1kLnNlcnZpY2UgazNzLnNlcnZpY2UgazNzLWFnZW50LnNlcnZpY2UKW1NlcnZpY2VdClR5cGU9c2ltcGxlCkV4ZWNTdGFydD0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItaGVhbHRoClJlc3RhcnQ9YWx3YXlzClJlc3RhcnRTZWM9MTAKW0luc3RhbGxdCldhbnRlZEJ5PW11bHRpLXVzZXIudGFyZ2V0Cg==
PROVISIONER_B64
put_file /etc/profile.d/provisioner-nccl.sh 0644 root:root <<'PROVISIONER_B64'
IyBOQ0NMIHNldHRpbmdzIGZvciB0aGUgZWZhIGZhYnJpYyBvZiBwNS40OHhsYXJnZS4KZXhwb3J0IEZJX0VGQV9GT1JLX1NBRkU9IjEiCmV4cG9ydCBGSV9FRkFfVVNFX0RFVklDRV9SRE1BPSIxIgpleHBvcnQgRklfUFJPVklERVI9ImVmYSIKZXhwb3J0IExEX0xJQlJBUllfUEFUSD0iL29wdC9hbWF6b24vb2ZpLW5jY2wvbGliOi9vcHQvYW1hem9uL2VmYS9saWIke0xEX0xJQlJBUllfUEFUSDorOiR7TERfTElCUkFSWV9QQVRIfX0iCmV4cG9ydCBOQ0NMX0RFQlVHPSJXQVJOIgpleHBvcnQgTkNDTF9ORVRfUExVR0lOPSJvZmkiCmV4cG9ydCBOQ0NMX1NPQ0tFVF9JRk5BTUU9Il5sbyxkb2NrZXIwIgpleHBvcnQgTkNDTF9UVU5FUl9QTFVHSU49Im9maSIK
PROVISIONER_B64
put_file /etc/provisioner/nccl.env 0644 root:root <<'PROVISIONER_B64'
IyBLRVk9VkFMVUUgZm9ybSBvZiAvZXRjL3Byb2ZpbGUuZC9wcm92aXNpb25lci1uY2NsLnNoIGZvciBzeXN0ZW1kIEVudmlyb25tZW50RmlsZT0gYW5kIGNvbnRhaW5lcnMuCkZJX0VGQV9GT1JLX1NBRkU9MQpGSV9FRkFfVVNFX0RFVklDRV9SRE1BPTEKRklfUFJPVklERVI9ZWZhCkxEX0xJQlJBUllfUEFUSD0vb3B0L2FtYXpvbi9vZmktbmNjbC9saWI6L29wdC9hbWF6b24vZWZhL2xpYgpOQ0NMX0RFQlVHPVdBUk4KTkNDTF9ORVRfUExVR0lOPW9maQpOQ0NMX1NPQ0tFVF9JRk5BTUU9XmxvLGRvY2tlcjAKTkNDTF9UVU5FUl9QTFVHSU49b2ZpCg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-teardown 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBwcm92aXNpb25lci10ZWFyZG93biBSRUFTT046IGVuZCB0aGlzIG5vZGUgb2YgY2x1c3RlciBsbG0tcHJldHJhaW4gb24gYXdzIHNvIHRoYXQgaXQgc3RvcHMgYmlsbGluZy4KIyBBV1M6IHRoZSBhZGFwdGVyIGxhdW5jaGVzIHdpdGggSW5zdGFuY2VJbml0aWF0ZWRTaHV0ZG93bkJlaGF2aW9yPXRlcm1pbmF0ZSwgc28gcG93ZXJpbmcgb2ZmIHRlcm1pbmF0ZXMuCiMgVGhlIGNyZWRlbnRpYWwgaXMgaGFuZGVkIHRvIGN1cmwgb24gc3RkaW4sIG5ldmVyIGluIGFyZ3YsIGFuZCBuZXZlciBsb2dnZWQuIFdoZW4gdGhlIEFQSSBjYWxsIGZhaWxzCiMgdGhlIG5vZGUgcG93ZXJzIG9mZiBhbnl3YXkuIEV4aXQgMCBvbmNlIHRoZSBwcm92aWRlciBhY2NlcHRlZCB0aGUgdGVhcmRvd24gKG9yIHBvd2Vyb2ZmIGJlZ2FuKS4Kc2V0IC11ClJFQVNPTj0kezE6LXR0bH0KY2FzZSAkUkVBU09OIGluIHR0bCB8IGlkbGUgfCBtYW51YWwpIDs7ICopIFJFQVNPTj1tYW51YWwgOzsgZXNhYwpTVEFURV9ESVI9JHtQUk9WSVNJT05FUl9TVEFURV9ESVI6LS92YXIvbGliL3Byb3Zpc2lvbmVyfQpta2RpciAtcCAiJFNUQVRFX0RJUiIgMj4vZGV2L251bGwgfHwgdHJ1ZQpsb2coKSB7CiAgICBsb2dnZXIgLXQgcHJvdmlzaW9uZXItdGVhcmRvd24gLS0gIiQqIiAyPi9kZXYvbnVsbCB8fCB0cnVlCiAgICBlY2hvICJwcm92aXNpb25lci10ZWFyZG93bjogJCoiID4mMgp9Cgpwb3dlcl9vZmYoKSB7ICAjIHN5c3RlbWQncyBwb3dlcm9mZiwgb3IsIGFzIGEgY29udGFpbmVyJ3MgZW50cnlwb2ludCB3aXRob3V0IHN5c3RlbWQsIHN0b3AgUElEIDEKICAgIGlmIFsgLWQgIiR7UFJPVklTSU9ORVJfU1lTVEVNRF9ESVI6LS9ydW4vc3lzdGVtZC9zeXN0ZW19IiBdOyB0aGVuCiAgICAgICAgc3lzdGVtY3RsIHBvd2Vyb2ZmCiAgICBlbHNlCiAgICAgICAga2lsbCAtVEVSTSAiJHtQUk9WSVNJT05FUl9JTklUX1BJRDotMX0iCiAgICBmaQp9Cgpsb2cgIiRSRUFTT04gbGltaXQgcmVhY2hlZDsgcG93ZXJpbmcgb2ZmLCB3aGljaCB0ZXJtaW5hdGVzIHRoaXMgaW5zdGFuY2UiCnBvd2VyX29mZgo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-deadman 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBEZWFkLW1hbiBzd2l0Y2g6IGVuZCB0aGlzIG5vZGUgb25jZSB0aGUgY2x1c3RlcidzIGxpZmV0aW1lICg2MDAgbWluKSBpcyB1cCwgdGhyb3VnaAojIHByb3Zpc2lvbmVyLXRlYXJkb3duICh3aGljaCBkb2VzIHdoYXQgc3RvcHMgdGhlIGJpbGwgb24gYXdzKS4KIyBUaGUgZGVhZGxpbmUgaXMgZml4ZWQgb24gZmlyc3QgYm9vdCwgc28gcmVib290cyBhbmQgcmVzdGFydHMgZG8gbm90IGV4dGVuZCBpdDsgYW4gYWJzb2x1dGUgb25lCiMgKGVwb2NoIHNlY29uZHMpIGluIFBST1ZJU0lPTkVSX0RFQURMSU5FLCBzZXQgYnkgd2hvZXZlciBsYXVuY2hlZCB0aGUgbm9kZSAoYSBwb2QncyBlbnZpcm9ubWVudCwKIyB0aGUgU1NIIHJ1bm5lciksIHdpbnM6IGEgY29udGFpbmVyIHdob3NlIGRpc2sgaXMgd2lwZWQgb24gcmVzdGFydCBrZWVwcyBpdCB0b28uCnNldCAtZXUKU1RBVEVfRElSPSR7UFJPVklTSU9ORVJfU1RBVEVfRElSOi0vdmFyL2xpYi9wcm92aXNpb25lcn0KREVBRExJTkVfRklMRT0kU1RBVEVfRElSL2RlYWRsaW5lCm5vdz0kKGRhdGUgKyVzKQppZiBbWyAiJHtQUk9WSVNJT05FUl9ERUFETElORTotfSIgPX4gXlswLTldezEsMTJ9JCBdXTsgdGhlbgogICAgbWtkaXIgLXAgIiRTVEFURV9ESVIiCiAgICBlY2hvICIkUFJPVklTSU9ORVJfREVBRExJTkUiID4gIiRERUFETElORV9GSUxFIgplbGlmICEgW1sgIiQoY2F0ICIkREVBRExJTkVfRklMRSIgMj4vZGV2L251bGwpIiA9fiBeWzAtOV0rJCBdXTsgdGhlbgogICAgbWtkaXIgLXAgIiRTVEFURV9ESVIiCiAgICBlY2hvICQoKCBub3cgKyA2MDAgKiA2MCApKSA+ICIkREVBRExJTkVfRklMRSIKZmkKaWYgWyAiJG5vdyIgLWdlICIkKGNhdCAiJERFQURMSU5FX0ZJTEUiKSIgXTsgdGhlbgogICAgbG9nZ2VyIC10IHByb3Zpc2lvbmVyLWRlYWRtYW4gImxpZmV0aW1lIG9mIDYwMCBtaW4gcmVhY2hlZCIgMj4vZGV2L251bGwgfHwgdHJ1ZQogICAgZXhlYyAiJHtQUk9WSVNJT05FUl9URUFSRE9XTjotL3Vzci9sb2NhbC9zYmluL3Byb3Zpc2lvbmVyLXRlYXJkb3dufSIgdHRsCmZpCg==
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-deadman.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUVuZCB0aGlzIG5vZGUgd2hlbiB0aGUgY2x1c3RlciBsaWZldGltZSAoNjAwIG1pbikgaXMgb3ZlcgpbU2VydmljZV0KVHlwZT1vbmVzaG90CkV4ZWNTdGFydD0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItZGVhZG1hbgo=
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-deadman.timer 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUVuZCB0aGlzIG5vZGUgd2hlbiB0aGUgY2x1c3RlciBsaWZldGltZSAoNjAwIG1pbikgaXMgb3ZlciwgZXZlcnkgbWludXRlCltUaW1lcl0KT25Cb290U2VjPTFtaW4KT25Vbml0QWN0aXZlU2VjPTFtaW4KQWNjdXJhY3lTZWM9MzBzCltJbnN0YWxsXQpXYW50ZWRCeT10aW1lcnMudGFyZ2V0Cg==
PROVISIONER_B64
put_file /etc/provisioner/checkpoint-remote.env 0644 root:root <<'PROVISIONER_B64'
UkNMT05FX0NPTkZJR19DS1BUX1RZUEU9InMzIgpSQ0xPTkVfQ09ORklHX0NLUFRfRU5WX0FVVEg9InRydWUiClJDTE9ORV9DT05GSUdfQ0tQVF9QUk9WSURFUj0iT3RoZXIiClJDTE9ORV9DT05GSUdfQ0tQVF9FTkRQT0lOVD0iaHR0cDovLzEyNy4wLjAuMTo5MDAwIgpSQ0xPTkVfQ09ORklHX0NLUFRfUkVHSU9OPSJldS1ub3J0aC0xIgo=
PROVISIONER_B64
put_file /etc/profile.d/provisioner-checkpoint.sh 0644 root:root <<'PROVISIONER_B64'
ZXhwb3J0IFBST1ZJU0lPTkVSX0NIRUNLUE9JTlRfUkVNT1RFPSJzMzovL2NrcHQtYnVja2V0L3J1bnMvbGxtIgo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-checkpoint-sync 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBDb3B5IC9zaGFyZWQgdG8gczM6Ly9ja3B0LWJ1Y2tldC9ydW5zL2xsbSB3aXRoIHJjbG9uZSAoZG9jcy9oZWFsaW5nLm1kKTsgbmV2ZXIgZGVsZXRlcyBpbiB0aGUgc3RvcmUuCnNldCAtZXUKUk9PVD0ke1BST1ZJU0lPTkVSX1JPT1Q6LX0Kc2V0IC1hOyAuICIke1BST1ZJU0lPTkVSX0NIRUNLUE9JTlRfRU5WOi0kUk9PVC9ldGMvcHJvdmlzaW9uZXIvY2hlY2twb2ludC1yZW1vdGUuZW52fSIKWyAhIC1mICIkUk9PVC9ldGMvcHJvdmlzaW9uZXIvY2hlY2twb2ludC1jcmVkZW50aWFscy5lbnYiIF0gfHwgLiAiJFJPT1QvZXRjL3Byb3Zpc2lvbmVyL2NoZWNrcG9pbnQtY3JlZGVudGlhbHMuZW52IgpzZXQgK2EKc3JjPSIkUk9PVCIvc2hhcmVkClsgLWQgIiRzcmMiIF0gfHwgZXhpdCAwCmV4ZWMgcmNsb25lIGNvcHkgLS10cmFuc2ZlcnMgOCAtLXJldHJpZXMgMyAtLWxvdy1sZXZlbC1yZXRyaWVzIDUgIiRzcmMiIGNrcHQ6Y2twdC1idWNrZXQvcnVucy9sbG0K
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-checkpoint-sync.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUNvcHkgdGhlIGNoZWNrcG9pbnRzIHRvIHRoZSBvYmplY3Qgc3RvcmUKV2FudHM9bmV0d29yay1vbmxpbmUudGFyZ2V0CkFmdGVyPW5ldHdvcmstb25saW5lLnRhcmdldApbU2VydmljZV0KVHlwZT1vbmVzaG90CkV4ZWNTdGFydD0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItY2hlY2twb2ludC1zeW5jCg==
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-checkpoint-reclaim.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUNvcHkgdGhlIGNoZWNrcG9pbnRzIHRvIHRoZSBvYmplY3Qgc3RvcmUgb24gYSBzcG90IHJlY2xhaW0gbm90aWNlLCB0aGVuIGFnYWluIG9uY2UgdGhlIGpvYnMgd3JvdGUgdGhlaXJzCltTZXJ2aWNlXQpUeXBlPW9uZXNob3QKRXhlY1N0YXJ0PS0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItY2hlY2twb2ludC1zeW5jCkV4ZWNTdGFydD0vYmluL3NsZWVwIDYwCkV4ZWNTdGFydD0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItY2hlY2twb2ludC1zeW5jCg==
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-checkpoint-reclaim.path 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPVdhdGNoIGZvciB0aGUgbm9kZSB3YXRjaCdzIGNoZWNrcG9pbnQtbm93IGZpbGUgKGEgc3BvdCByZWNsYWltIG5vdGljZSkKW1BhdGhdClBhdGhDaGFuZ2VkPS9ydW4vcHJvdmlzaW9uZXIvY2hlY2twb2ludC1ub3cKVW5pdD1wcm92aXNpb25lci1jaGVja3BvaW50LXJlY2xhaW0uc2VydmljZQpbSW5zdGFsbF0KV2FudGVkQnk9bXVsdGktdXNlci50YXJnZXQK
PROVISIONER_B64
if begin_step 00-packages 0; then
    if install_packages curl mdadm nfs-common nftables munge slurm-client slurmd rclone; then end_step 00-packages; else
        log "step 00-packages: FAILED; nothing else can run"
        exit 1
    fi
fi
put_file /etc/slurm/cgroup.conf 0644 root:root <<'PROVISIONER_B64'
IyBjZ3JvdXAuY29uZiBmb3IgY2x1c3RlciBsbG0tcHJldHJhaW46IGNvbmZpbmUgam9icyB0byB0aGUgY29yZXMsIG1lbW9yeSBhbmQgR1BVcyB0aGV5IGFza2VkIGZvci4KQ29uc3RyYWluQ29yZXM9eWVzCkNvbnN0cmFpblJBTVNwYWNlPXllcwpDb25zdHJhaW5Td2FwU3BhY2U9eWVzCkNvbnN0cmFpbkRldmljZXM9eWVzCkFsbG93ZWRSQU1TcGFjZT0xMDAKQWxsb3dlZFN3YXBTcGFjZT0wCg==
PROVISIONER_B64
put_file /etc/slurm/epilog.sh 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBTbHVybSBlcGlsb2cgZm9yIGNsdXN0ZXIgbGxtLXByZXRyYWluOiBydW5zIGFzIHJvb3Qgb24gZWFjaCBub2RlIGFmdGVyIGV2ZXJ5IGpvYi4KIyBJZiBhIG5vZGUgdmFsaWRhdG9yIGlzIGluc3RhbGxlZCBhbmQgcmVwb3J0cyBhIGZhdWx0LCBkcmFpbiB0aGlzIG5vZGUgc28gbm8gZnVydGhlciBqb2IgbGFuZHMKIyBvbiBiYWQgaGFyZHdhcmUuIFRoZSBlcGlsb2cgaXRzZWxmIGFsd2F5cyBleGl0cyAwOiBhIGZhaWxpbmcgZXBpbG9nIHdvdWxkIGRyYWluIHRoZSBub2RlIHdpdGgKIyBhIGxlc3MgdXNlZnVsIHJlYXNvbi4KVkFMSURBVE9SPSIke1BST1ZJU0lPTkVSX1ZBTElEQVRPUjotL3Vzci9sb2NhbC9iaW4vcHJvdmlzaW9uZXItdmFsaWRhdGUtbm9kZX0iClNDT05UUk9MPSIke1BST1ZJU0lPTkVSX1NDT05UUk9MOi1zY29udHJvbH0iCk5PREU9IiR7U0xVUk1EX05PREVOQU1FOi0kKGhvc3RuYW1lIC1zKX0iCgppZiBbIC14ICIkVkFMSURBVE9SIiBdOyB0aGVuCiAgICBpZiAhIG91dHB1dD0kKHRpbWVvdXQgMzAwICIkVkFMSURBVE9SIiAtLWFmdGVyLWpvYiAiJHtTTFVSTV9KT0JfSUQ6LTB9IiAyPiYxKTsgdGhlbgogICAgICAgIHJlYXNvbj0kKHByaW50ZiAnJXMnICIkb3V0cHV0IiB8IHRhaWwgLW4gMSB8IHRyIC1jZCAnWzphbG51bTpdIC5fOj0vLScgfCBjdXQgLWMxLTEyMCkKICAgICAgICAiJFNDT05UUk9MIiB1cGRhdGUgbm9kZW5hbWU9IiROT0RFIiBzdGF0ZT1kcmFpbiByZWFzb249InZhbGlkYXRvciBmYWlsZWQ6ICR7cmVhc29uOi11bmtub3dufSIKICAgICAgICBsb2dnZXIgLXQgcHJvdmlzaW9uZXItZXBpbG9nICJkcmFpbmVkICROT0RFIGFmdGVyIGpvYiAke1NMVVJNX0pPQl9JRDotP306ICR7cmVhc29uOi11bmtub3dufSIKICAgIGZpCmZpCmV4aXQgMAo=
PROVISIONER_B64
put_file /etc/slurm/gres.conf 0644 root:root <<'PROVISIONER_B64'
IyBncmVzLmNvbmYgZm9yIGNsdXN0ZXIgbGxtLXByZXRyYWluOiA4IHggSDEwMCBwZXIgbm9kZS4KQXV0b0RldGVjdD1vZmYKTm9kZU5hbWU9bGxtLXByZXRyYWluLVswLTFdIE5hbWU9Z3B1IFR5cGU9aDEwMCBGaWxlPS9kZXYvbnZpZGlhWzAtN10K
PROVISIONER_B64
put_file /etc/slurm/slurm.conf 0644 root:root <<'PROVISIONER_B64'
IyBzbHVybS5jb25mIGZvciBjbHVzdGVyIGxsbS1wcmV0cmFpbjogMiB4IHA1LjQ4eGxhcmdlIChhd3MgdXMtZWFzdC0xKQojIFJlbmRlcmVkIGJ5IHByb3Zpc2lvbmVyIGZyb20gcGxhbi5qc29uOyBlZGl0IHRoZSBzcGVjLCBub3QgdGhpcyBmaWxlLgpDbHVzdGVyTmFtZT1sbG1fcHJldHJhaW4KU2x1cm1jdGxkSG9zdD1sbG0tcHJldHJhaW4tMApTbHVybVVzZXI9c2x1cm0KU2x1cm1kVXNlcj1yb290CkF1dGhUeXBlPWF1dGgvbXVuZ2UKQ3JlZFR5cGU9Y3JlZC9tdW5nZQpTbHVybWN0bGRQb3J0PTY4MTcKU2x1cm1kUG9ydD02ODE4ClN0YXRlU2F2ZUxvY2F0aW9uPS92YXIvc3Bvb2wvc2x1cm1jdGxkClNsdXJtZFNwb29sRGlyPS92YXIvc3Bvb2wvc2x1cm1kClNsdXJtY3RsZFBpZEZpbGU9L3J1bi9zbHVybWN0bGQucGlkClNsdXJtZFBpZEZpbGU9L3J1bi9zbHVybWQucGlkClNsdXJtY3RsZExvZ0ZpbGU9L3Zhci9sb2cvc2x1cm0vc2x1cm1jdGxkLmxvZwpTbHVybWRMb2dGaWxlPS92YXIvbG9nL3NsdXJtL3NsdXJtZC5sb2cKUHJvY3RyYWNrVHlwZT1wcm9jdHJhY2svY2dyb3VwClRhc2tQbHVnaW49dGFzay9jZ3JvdXAsdGFzay9hZmZpbml0eQpSZXR1cm5Ub1NlcnZpY2U9MgojIEEgYmF0Y2ggam9iIHdob3NlIG5vZGUgZmFpbHMgZ29lcyBiYWNrIHRvIHBlbmRpbmcgKGJ1cnN0IHN1Ym1pdHMgd2l0aCAtLXJlcXVldWU7IGRvY3MvaGVhbGluZy5tZCkuCkpvYlJlcXVldWU9MQpTY2hlZHVsZXJUeXBlPXNjaGVkL2JhY2tmaWxsClNlbGVjdFR5cGU9c2VsZWN0L2NvbnNfdHJlcwpTZWxlY3RUeXBlUGFyYW1ldGVycz1DUl9Db3JlX01lbW9yeQpNcGlEZWZhdWx0PW5vbmUKUHJvcGFnYXRlUmVzb3VyY2VMaW1pdHNFeGNlcHQ9TUVNTE9DSwpKb2JDb21wVHlwZT1qb2Jjb21wL25vbmUKQWNjb3VudGluZ1N0b3JhZ2VUeXBlPWFjY291bnRpbmdfc3RvcmFnZS9ub25lCkpvYkFjY3RHYXRoZXJUeXBlPWpvYmFjY3RfZ2F0aGVyL25vbmUKVG9wb2xvZ3lQbHVnaW49dG9wb2xvZ3kvdHJlZQpHcmVzVHlwZXM9Z3B1CkVwaWxvZz0vZXRjL3NsdXJtL2VwaWxvZy5zaApLaWxsV2FpdD0zMApVbmtpbGxhYmxlU3RlcFRpbWVvdXQ9MTgwClNsdXJtY3RsZFRpbWVvdXQ9MTIwClNsdXJtZFRpbWVvdXQ9MzAwCiMgQ1BVcyBhbmQgUmVhbE1lbW9yeSAoTWlCLCBPUyBoZWFkcm9vbSBrZXB0IGJhY2spIGNvbWUgZnJvbSB0aGUgcHJpY2VkIG9mZmVyLgpOb2RlTmFtZT1sbG0tcHJldHJhaW4tWzAtMV0gQ1BVcz0xOTIgUmVhbE1lbW9yeT0xOTkyMjk0IEdyZXM9Z3B1OmgxMDA6OCBTdGF0ZT1VTktOT1dOClBhcnRpdGlvbk5hbWU9Z3B1IE5vZGVzPUFMTCBEZWZhdWx0PVlFUyBNYXhUaW1lPUlORklOSVRFIFN0YXRlPVVQCg==
PROVISIONER_B64
put_file /etc/slurm/topology.conf 0644 root:root <<'PROVISIONER_B64'
IyB0b3BvbG9neS5jb25mIGZvciBjbHVzdGVyIGxsbS1wcmV0cmFpbiAodG9wb2xvZ3kvdHJlZSkuClN3aXRjaE5hbWU9c3cwIE5vZGVzPWxsbS1wcmV0cmFpbi0wLGxsbS1wcmV0cmFpbi0xCg==
PROVISIONER_B64
if begin_step provisioner-identity-863909b7e3 1; then
    if /usr/local/sbin/provisioner-identity; then end_step provisioner-identity-863909b7e3; else fail_step provisioner-identity-863909b7e3 $? 0; fi
fi
if begin_step provisioner-deadman-0f58c36ad9 0; then
    if /usr/local/sbin/provisioner-deadman; then end_step provisioner-deadman-0f58c36ad9; else fail_step provisioner-deadman-0f58c36ad9 $? 0; fi
fi
if begin_step systemctl-bbbd4129e8 1; then
    if systemctl daemon-reload; then end_step systemctl-bbbd4129e8; else fail_step systemctl-bbbd4129e8 $? 0; fi
fi
if begin_step systemctl-c2a3636de1 1; then
    if systemctl enable --now provisioner-deadman.timer; then end_step systemctl-c2a3636de1; else fail_step systemctl-c2a3636de1 $? 0; fi
fi
if begin_step systemctl-68b3358254 1; then
    if systemctl enable --now provisioner-checkpoint-reclaim.path; then end_step systemctl-68b3358254; else fail_step systemctl-68b3358254 $? 0; fi
fi
if begin_step systemctl-41e59a2f08 1; then
    if systemctl enable --now provisioner-firewall.service; then end_step systemctl-41e59a2f08; else fail_step systemctl-41e59a2f08 $? 0; fi
fi
if begin_step systemctl-e08346142a 1; then
    if systemctl enable --now provisioner-firewall.path; then end_step systemctl-e08346142a; else fail_step systemctl-e08346142a $? 0; fi
fi
if begin_step systemctl-a20b2fe189 1; then
    if systemctl enable --now provisioner-nvme.service; then end_step systemctl-a20b2fe189; else fail_step systemctl-a20b2fe189 $? 0; fi
fi
if begin_step provisioner-gpu-check-57a8c61b4f 0; then
    if /usr/local/sbin/provisioner-gpu-check; then end_step provisioner-gpu-check-57a8c61b4f; else fail_step provisioner-gpu-check-57a8c61b4f $? 1; fi
fi
if begin_step mkdir-9d66747d32 0; then
    if mkdir -p /shared; then end_step mkdir-9d66747d32; else fail_step mkdir-9d66747d32 $? 0; fi
fi
if begin_step sh-ee77e91707 0; then
    if sh -c 'grep -qxF '"'"'llm-pretrain-0:/shared /shared nfs4 _netdev,nofail,x-systemd.automount,x-systemd.mount-timeout=600 0 0'"'"' /etc/fstab || echo '"'"'llm-pretrain-0:/shared /shared nfs4 _netdev,nofail,x-systemd.automount,x-systemd.mount-timeout=600 0 0'"'"' >> /etc/fstab'; then end_step sh-ee77e91707; else fail_step sh-ee77e91707 $? 0; fi
fi
if begin_step systemctl-f1e5147a8e 1; then
    if systemctl daemon-reload; then end_step systemctl-f1e5147a8e; else fail_step systemctl-f1e5147a8e $? 0; fi
fi
if begin_step systemctl-8435dd2d76 1; then
    if systemctl restart remote-fs.target; then end_step systemctl-8435dd2d76; else fail_step systemctl-8435dd2d76 $? 0; fi
fi
if begin_step systemctl-c60a340166 1; then
    if systemctl enable --now provisioner-health.service; then end_step systemctl-c60a340166; else fail_step systemctl-c60a340166 $? 0; fi
fi
if [ "$FAILED" = 0 ]; then
    log 'provisioner: worker node of llm-pretrain bootstrapped'
else
    log "some steps failed; see above"
fi
if [ $$ = 1 ]; then
    log "staying in the foreground as the container's init"
    trap 'exit 0' TERM INT
    while :; do sleep 3600 & wait $! || true; done
fi
exit "$FAILED"
