#!/bin/bash
# provisioner bootstrap: head node(s) of cluster h200-big-data (p5en.48xlarge on aws).
# The same bootstrap as cloud-init/head.yaml, for nodes where cloud-init does not run: a
# container pod's entrypoint (no systemd: daemons are started directly) or a VM reached over SSH.
# Idempotent and resumable: a step that succeeded is not run again; run it again after a failure.
# Set PROVISIONER_NODE_NAME to this node's name (h200-big-data-<i>) where the hostname is not it.
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

log 'head node of h200-big-data,' "systemd: $HAVE_SYSTEMD"
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
authorize ml 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnlyForDocsDoNotUse0000000000 ml@example'
authorize root 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnlyForDocsDoNotUse0000000000 ml@example'
put_file /etc/provisioner/hostkey-token 0600 root:root <<'PROVISIONER_B64'
UFJPVklTSU9ORVJfSE9TVEtFWV9UT0tFTl9TTE9U
PROVISIONER_B64
put_file /etc/provisioner/firewall.nft 0644 root:root <<'PROVISIONER_B64'
IyEvdXNyL3NiaW4vbmZ0IC1mCiMgTm9kZSBmaXJld2FsbCBmb3IgY2x1c3RlciBoMjAwLWJpZy1kYXRhLCBjbG9zZWQgYnkgZGVmYXVsdCAocG9saWN5IGRyb3ApOiBTU0ggb25seSBmcm9tCiMgYWNjZXNzLmFsbG93ZWRfY2lkcnMgYW5kIHRoZSBjbHVzdGVyJ3Mgb3duIG5vZGVzOyBldmVyeXRoaW5nIGVsc2UgKFNsdXJtLCBrM3MsIE5GUywgTkNDTCwgc3J1bidzCiMgc3RlcCBJL08pIG9ubHkgZnJvbSB0aGUgY2x1c3RlcidzIG93biBub2RlczsgcGx1cyBsb29wYmFjaywgcmVwbGllcywKIyBJQ01QIGFuZCBESENQLiBObyBwb3J0IGlzIG9wZW4gdG8gdGhlIEludGVybmV0IGJ1dCAyMiB0byBhbGxvd2VkX2NpZHJzIChrM3MncyBUcmFlZmlrIGFuZAojIFNlcnZpY2VMQiBhcmUgbm90IGluc3RhbGxlZCB1bmxlc3MgYXNrZWQpLiBPbmx5IHJvb3QgbWF5IHJlYWNoIHRoZSBpbnN0YW5jZSBtZXRhZGF0YSBhZGRyZXNzCiMgMTY5LjI1NC4xNjkuMjU0IC8gZmQwMDplYzI6OjI1NCAodXNlciBkYXRhLCBjcmVkZW50aWFscyk6IGpvYnMgYW5kIHBvZHMgYXJlIGRyb3BwZWQgdGhlcmUuCiMgVGhlIG5vZGUgYWRkcmVzc2VzIGFyZSBhZGRlZCBhdCBib290IGJ5IHByb3Zpc2lvbmVyLWZpcmV3YWxsIGZyb20gL2V0Yy9wcm92aXNpb25lci9ob3N0cyAodGhlCiMgY2x1c3RlciBzZXRzIGJlbG93IGhvbGQgb25seSB3aGF0IGlzIGtub3duIGJlZm9yZSBib290KS4gTG9hZGluZyB0aGlzIGZpbGUgYWdhaW4gcmVwbGFjZXMgdGhlCiMgdGFibGUgYXRvbWljYWxseSAoaWRlbXBvdGVudCkuIFByb3RvY29scyBhcmUgbnVtYmVycyAoMSBJQ01QLCA1OCBJQ01QdjYpOiBhIG1pbmltYWwgaW1hZ2UgaGFzIG5vCiMgL2V0Yy9wcm90b2NvbHMgdG8gcmVzb2x2ZSBuYW1lcywgYW5kIGEgcnVsZXNldCB0aGF0IGZhaWxzIHRvIGxvYWQgcHJvdGVjdHMgbm90aGluZy4KdGFibGUgaW5ldCBwcm92aXNpb25lcgpkZWxldGUgdGFibGUgaW5ldCBwcm92aXNpb25lcgp0YWJsZSBpbmV0IHByb3Zpc2lvbmVyIHsKICAgIHNldCBzc2hfdjQgewogICAgICAgIHR5cGUgaXB2NF9hZGRyCiAgICAgICAgZmxhZ3MgaW50ZXJ2YWwKICAgIH0KICAgIHNldCBzc2hfdjYgewogICAgICAgIHR5cGUgaXB2Nl9hZGRyCiAgICAgICAgZmxhZ3MgaW50ZXJ2YWwKICAgIH0KICAgIHNldCBjbHVzdGVyX3Y0IHsKICAgICAgICB0eXBlIGlwdjRfYWRkcgogICAgICAgIGZsYWdzIGludGVydmFsCiAgICB9CiAgICBzZXQgY2x1c3Rlcl92NiB7CiAgICAgICAgdHlwZSBpcHY2X2FkZHIKICAgICAgICBmbGFncyBpbnRlcnZhbAogICAgfQogICAgY2hhaW4gaW5wdXQgewogICAgICAgIHR5cGUgZmlsdGVyIGhvb2sgaW5wdXQgcHJpb3JpdHkgZmlsdGVyOyBwb2xpY3kgZHJvcDsKICAgICAgICBpaWYgImxvIiBhY2NlcHQKICAgICAgICBjdCBzdGF0ZSBlc3RhYmxpc2hlZCxyZWxhdGVkIGFjY2VwdAogICAgICAgIGN0IHN0YXRlIGludmFsaWQgZHJvcAogICAgICAgIG1ldGEgbDRwcm90byB7IDEsIDU4IH0gYWNjZXB0CiAgICAgICAgdWRwIHNwb3J0IDY3IHVkcCBkcG9ydCA2OCBhY2NlcHQKICAgICAgICB1ZHAgc3BvcnQgNTQ3IHVkcCBkcG9ydCA1NDYgYWNjZXB0CiAgICAgICAgdGNwIGRwb3J0IDIyIGlwIHNhZGRyIEBzc2hfdjQgYWNjZXB0CiAgICAgICAgdGNwIGRwb3J0IDIyIGlwNiBzYWRkciBAc3NoX3Y2IGFjY2VwdAogICAgICAgIGlwIHNhZGRyIEBjbHVzdGVyX3Y0IGFjY2VwdAogICAgICAgIGlwNiBzYWRkciBAY2x1c3Rlcl92NiBhY2NlcHQKICAgICAgICBjb3VudGVyIGRyb3AKICAgIH0KICAgIGNoYWluIG91dHB1dCB7CiAgICAgICAgdHlwZSBmaWx0ZXIgaG9vayBvdXRwdXQgcHJpb3JpdHkgZmlsdGVyOyBwb2xpY3kgYWNjZXB0OwogICAgICAgIGlwIGRhZGRyIDE2OS4yNTQuMTY5LjI1NCBtZXRhIHNrdWlkICE9IDAgY291bnRlciBkcm9wCiAgICAgICAgaXA2IGRhZGRyIGZkMDA6ZWMyOjoyNTQgbWV0YSBza3VpZCAhPSAwIGNvdW50ZXIgZHJvcAogICAgfQogICAgY2hhaW4gZm9yd2FyZCB7CiAgICAgICAgdHlwZSBmaWx0ZXIgaG9vayBmb3J3YXJkIHByaW9yaXR5IGZpbHRlcjsgcG9saWN5IGFjY2VwdDsKICAgICAgICBpcCBkYWRkciAxNjkuMjU0LjE2OS4yNTQgY291bnRlciBkcm9wCiAgICAgICAgaXA2IGRhZGRyIGZkMDA6ZWMyOjoyNTQgY291bnRlciBkcm9wCiAgICB9Cn0K
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-firewall 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBwcm92aXNpb25lci1maXJld2FsbDogYXBwbHkgdGhlIG5vZGUgbGlzdCBvZiBjbHVzdGVyIGgyMDAtYmlnLWRhdGEgKC9ldGMvcHJvdmlzaW9uZXIvaG9zdHMsICJJUCBOQU1FIiBsaW5lcykuCiMgLSB0aGUgbm9kZSBmaXJld2FsbDogL2V0Yy9wcm92aXNpb25lci9maXJld2FsbC5uZnQgcGx1cyBldmVyeSBub2RlIGFkZHJlc3MgaW4gdGhlIGNsdXN0ZXIgc2V0cywgb25lIG5mdCB0cmFuc2FjdGlvbjsKIyAtIHRoZSBub2RlIG5hbWVzIGluIC9ldGMvaG9zdHMgKG9uZSBtYXJrZWQgYmxvY2ssIHJlcGxhY2VkKS4KIyBVbnRpbCB0aGUgbGlzdCBleGlzdHMgdGhlIGNsdXN0ZXIgc2V0cyBob2xkIG5vdGhpbmcgKGRhZW1vbnMgYW5zd2VyIHRoaXMgbm9kZSBvbmx5KS4KIyBJZGVtcG90ZW50OyBydW4gYWdhaW4gd2hlbmV2ZXIgdGhlIGxpc3QgY2hhbmdlcyAocHJvdmlzaW9uZXItZmlyZXdhbGwucGF0aCkuIE9ubHkgYWRkcmVzcy1zaGFwZWQKIyB3b3JkcyBmcm9tIHRoZSBsaXN0IGFyZSB1c2VkLiBQcmVmaXggZXZlcnkgcGF0aCB3aXRoICRQUk9WSVNJT05FUl9ST09UICh0ZXN0cykuCnNldCAtZXVvIHBpcGVmYWlsClJPT1Q9JHtQUk9WSVNJT05FUl9ST09UOi19CkhPU1RTPSRST09UL2V0Yy9wcm92aXNpb25lci9ob3N0cwp2ND0oKSB2Nj0oKSBuYW1lcz0oKQppZiBbIC1yICIkSE9TVFMiIF07IHRoZW4KICAgIHdoaWxlIHJlYWQgLXIgYWRkciBuYW1lIF87IGRvCiAgICAgICAgY2FzZSAkYWRkciBpbiAnJyB8ICcjJyopIGNvbnRpbnVlIDs7IGVzYWMKICAgICAgICBpZiBbWyAkYWRkciA9fiBeWzAtOV17MSwzfShcLlswLTldezEsM30pezN9JCBdXTsgdGhlbgogICAgICAgICAgICB2NCs9KCIkYWRkciIpCiAgICAgICAgZWxpZiBbWyAkYWRkciA9fiBeWzAtOUEtRmEtZjouXXsyLDQ1fSQgJiYgJGFkZHIgPT0gKjoqIF1dOyB0aGVuCiAgICAgICAgICAgIHY2Kz0oIiRhZGRyIikKICAgICAgICBlbHNlCiAgICAgICAgICAgIGVjaG8gInByb3Zpc2lvbmVyLWZpcmV3YWxsOiBpZ25vcmluZyBhIGxpbmUgb2YgJEhPU1RTIHdob3NlIGZpcnN0IHdvcmQgaXMgbm90IGFuIElQIGFkZHJlc3MiID4mMgogICAgICAgICAgICBjb250aW51ZQogICAgICAgIGZpCiAgICAgICAgaWYgW1sgJHtuYW1lOi19ID1+IF5bQS1aYS16MC05XVtBLVphLXowLTkuLV17MCw2Mn0kIF1dOyB0aGVuIG5hbWVzKz0oIiRhZGRyICRuYW1lIik7IGZpCiAgICBkb25lIDwgIiRIT1NUUyIKZWxzZQogICAgZWNobyAicHJvdmlzaW9uZXItZmlyZXdhbGw6IG5vICRIT1NUUyB5ZXQ7IGNsdXN0ZXIgZGFlbW9ucyBhbnN3ZXIgdGhpcyBub2RlIG9ubHkgdW50aWwgaXQgYXBwZWFycyIgPiYyCmZpCmpvaW4oKSB7IGxvY2FsIElGUz0sOyBlY2hvICIkKiI7IH0Kc3RhdHVzPTAKaWYgISBvdXQ9JCh7CiAgICBjYXQgIiRST09UL2V0Yy9wcm92aXNpb25lci9maXJld2FsbC5uZnQiCiAgICBpZiBbIC1uICIke3Y0WypdOi19IiBdOyB0aGVuIGVjaG8gImFkZCBlbGVtZW50IGluZXQgcHJvdmlzaW9uZXIgY2x1c3Rlcl92NCB7ICQoam9pbiAiJHt2NFtAXX0iKSB9IjsgZmkKICAgIGlmIFsgLW4gIiR7djZbKl06LX0iIF07IHRoZW4gZWNobyAiYWRkIGVsZW1lbnQgaW5ldCBwcm92aXNpb25lciBjbHVzdGVyX3Y2IHsgJChqb2luICIke3Y2W0BdfSIpIH0iOyBmaQp9IHwgbmZ0IC1mIC0gMj4mMSk7IHRoZW4KICAgIGlmIFtbICRvdXQgPT0gKiJPcGVyYXRpb24gbm90IHBlcm1pdHRlZCIqIF1dOyB0aGVuCiAgICAgICAgIyBBIGNvbnRhaW5lciB3aXRob3V0IENBUF9ORVRfQURNSU4gKFJ1blBvZCwgVmFzdC5haSBwb2RzKTogbm8gbm9kZSBmaXJld2FsbCBpcyBwb3NzaWJsZSB0aGVyZTsKICAgICAgICAjIHRoZSBwcm92aWRlcidzIHBvcnQgbWFwcGluZyBpcyB0aGUgb25seSBib3VuZGFyeS4gU2FpZCBsb3VkbHk7IHRoZSByZXN0IHN0aWxsIGFwcGxpZXMuCiAgICAgICAgZWNobyAicHJvdmlzaW9uZXItZmlyZXdhbGw6IFdBUk5JTkcgY2Fubm90IGxvYWQgbmZ0YWJsZXMgaGVyZSAobm8gQ0FQX05FVF9BRE1JTik6IG9ubHkgdGhlIHByb3ZpZGVyJ3Mgb3duIGZpcmV3YWxsIG9yIHBvcnQgbWFwcGluZyBwcm90ZWN0cyB0aGlzIG5vZGUiID4mMgogICAgZWxzZQogICAgICAgIGVjaG8gInByb3Zpc2lvbmVyLWZpcmV3YWxsOiBGQUlMRUQgdG8gbG9hZCB0aGUgbm9kZSBmaXJld2FsbDogJG91dCIgPiYyCiAgICAgICAgc3RhdHVzPTEKICAgIGZpCmZpCmlmIFsgLW4gIiR7bmFtZXNbKl06LX0iIF07IHRoZW4KICAgIGV0Y19ob3N0cz0kUk9PVC9ldGMvaG9zdHMKICAgIHsKICAgICAgICBzZWQgJy9eIyBwcm92aXNpb25lciBob3N0cyBiZWdpbiQvLC9eIyBwcm92aXNpb25lciBob3N0cyBlbmQkL2QnICIkZXRjX2hvc3RzIiAyPiAvZGV2L251bGwgfHwgdHJ1ZQogICAgICAgIGVjaG8gJyMgcHJvdmlzaW9uZXIgaG9zdHMgYmVnaW4nCiAgICAgICAgcHJpbnRmICclc1xuJyAiJHtuYW1lc1tAXX0iCiAgICAgICAgZWNobyAnIyBwcm92aXNpb25lciBob3N0cyBlbmQnCiAgICB9ID4gIiRldGNfaG9zdHMucHJvdmlzaW9uZXIiCiAgICBjYXQgIiRldGNfaG9zdHMucHJvdmlzaW9uZXIiID4gIiRldGNfaG9zdHMiICAjIGluIHBsYWNlOiBhIGNvbnRhaW5lcidzIC9ldGMvaG9zdHMgaXMgYSBiaW5kIG1vdW50CiAgICBybSAtZiAiJGV0Y19ob3N0cy5wcm92aXNpb25lciIKZmkKZWNobyAicHJvdmlzaW9uZXItZmlyZXdhbGw6IG5vZGUgYWRkcmVzc2VzIGFwcGxpZWQ6ICR7djRbKl06LX0gJHt2NlsqXTotfSIKZXhpdCAiJHN0YXR1cyIK
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-firewall.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPU5vZGUgZmlyZXdhbGwsIE5GUyBleHBvcnRzIGFuZCBub2RlIG5hbWVzIG9mIHRoZSBjbHVzdGVyIGZyb20gL2V0Yy9wcm92aXNpb25lci9ob3N0cwpXYW50cz1uZXR3b3JrLXByZS50YXJnZXQKQmVmb3JlPW5ldHdvcmstcHJlLnRhcmdldCBzc2guc2VydmljZSBzbHVybWQuc2VydmljZSBzbHVybWN0bGQuc2VydmljZSBrM3Muc2VydmljZSBrM3MtYWdlbnQuc2VydmljZSBuZnMtc2VydmVyLnNlcnZpY2UKW1NlcnZpY2VdClR5cGU9b25lc2hvdApFeGVjU3RhcnQ9L3Vzci9sb2NhbC9zYmluL3Byb3Zpc2lvbmVyLWZpcmV3YWxsCltJbnN0YWxsXQpXYW50ZWRCeT1tdWx0aS11c2VyLnRhcmdldAo=
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-firewall.path 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUFwcGx5IHRoZSBjbHVzdGVyJ3Mgbm9kZSBsaXN0IGFnYWluIHdoZW5ldmVyIC9ldGMvcHJvdmlzaW9uZXIvaG9zdHMgY2hhbmdlcwpbUGF0aF0KUGF0aENoYW5nZWQ9L2V0Yy9wcm92aXNpb25lci9ob3N0cwpVbml0PXByb3Zpc2lvbmVyLWZpcmV3YWxsLnNlcnZpY2UKW0luc3RhbGxdCldhbnRlZEJ5PW11bHRpLXVzZXIudGFyZ2V0Cg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-identity 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBXb3JrIG91dCB3aGljaCBub2RlIG9mIGNsdXN0ZXIgaDIwMC1iaWctZGF0YSB0aGlzIG1hY2hpbmUgaXMsIGZyb20gdGhlIHByb3ZpZGVyJ3MgbWV0YWRhdGEKIyAodGhlIGluc3RhbmNlIG5hbWUgdGhlIHN0YWNrIGdhdmUgaXQpLCBzZXQgdGhlIGhvc3RuYW1lIHRvIGl0IGFuZCByZWNvcmQgaXQgaW4KIyAvZXRjL3Byb3Zpc2lvbmVyL2lkZW50aXR5LmVudi4gUFJPVklTSU9ORVJfTk9ERV9OQU1FIChzZXQgYnkgdGhlIHN0YWNrIHdoZXJlIHRoZSBwcm92aWRlciBoYXMKIyBubyBpbnN0YW5jZS1uYW1lIG1ldGFkYXRhLCBlLmcuIGEgY29udGFpbmVyIHBvZCdzIGVudmlyb25tZW50KSB3aW5zOyBmYWxscyBiYWNrIHRvIHRoZSBjdXJyZW50CiMgc2hvcnQgaG9zdG5hbWUuCnNldCAtdQpQUkVGSVg9aDIwMC1iaWctZGF0YS0KUk9PVD0ke1BST1ZJU0lPTkVSX1JPT1Q6LX0KaXNfbm9kZSgpIHsgW1sgIiQxIiA9PSAiJFBSRUZJWCIqICYmICIkezEjIiRQUkVGSVgifSIgPX4gXlswLTldKyQgXV07IH0KIyBBZGFwdGVycyBtYXkgbmFtZSB0aGUgaW5zdGFuY2UgIjxjbHVzdGVyPi08bm9kZT4iIChlLmcuIGxsbS1wcmV0cmFpbi1sbG0tcHJldHJhaW4tMCk6IGtlZXAgdGhlIG5vZGUuCm5vZGVfb2YoKSB7IGxvY2FsIHRhaWw9JHsxIyMqIiRQUkVGSVgifTsgW1sgIiQxIiA9PSAqIiRQUkVGSVgiKiAmJiAkdGFpbCA9fiBeWzAtOV0rJCBdXSAmJiBlY2hvICIkUFJFRklYJHRhaWwiOyB9Cm5hbWU9IiR7UFJPVklTSU9ORVJfTk9ERV9OQU1FOi19IgppZiBbIC16ICIkbmFtZSIgXTsgdGhlbgogICAgdG9rZW49JChjdXJsIC1zZiAtbSA1IC1YIFBVVCBodHRwOi8vMTY5LjI1NC4xNjkuMjU0L2xhdGVzdC9hcGkvdG9rZW4gLUggIlgtYXdzLWVjMi1tZXRhZGF0YS10b2tlbi10dGwtc2Vjb25kczogNjAiIHx8IHRydWUpCiAgICBuYW1lPSQoY3VybCAtc2YgLW0gNSAtSCAiWC1hd3MtZWMyLW1ldGFkYXRhLXRva2VuOiAkdG9rZW4iIGh0dHA6Ly8xNjkuMjU0LjE2OS4yNTQvbGF0ZXN0L21ldGEtZGF0YS90YWdzL2luc3RhbmNlL05hbWUgfHwgdHJ1ZSkKZmkKbmFtZT0kKG5vZGVfb2YgIiRuYW1lIiB8fCB0cnVlKQppZiAhIGlzX25vZGUgIiRuYW1lIjsgdGhlbgogICAgbmFtZT0kKG5vZGVfb2YgIiQoaG9zdG5hbWUgLXMpIiB8fCB0cnVlKQpmaQppZiAhIGlzX25vZGUgIiRuYW1lIjsgdGhlbgogICAgZWNobyAicHJvdmlzaW9uZXItaWRlbnRpdHk6IGNhbm5vdCB0ZWxsIHdoaWNoIG5vZGUgdGhpcyBpcyAoZ290ICcke1BST1ZJU0lPTkVSX05PREVfTkFNRTotfScgLyAnJChob3N0bmFtZSAtcyknKSIgPiYyCiAgICBleGl0IDEKZmkKaG9zdG5hbWVjdGwgc2V0LWhvc3RuYW1lICIkbmFtZSIgMj4vZGV2L251bGwgfHwgaG9zdG5hbWUgIiRuYW1lIgpyb2xlPXdvcmtlcgpbICIkbmFtZSIgPSBoMjAwLWJpZy1kYXRhLTAgXSAmJiByb2xlPWhlYWQKbWtkaXIgLXAgIiRST09UL2V0Yy9wcm92aXNpb25lciIKcHJpbnRmICdOT0RFX05BTUU9JXNcbk5PREVfUk9MRT0lc1xuSEVBRF9OT0RFPSVzXG4nICIkbmFtZSIgIiRyb2xlIiBoMjAwLWJpZy1kYXRhLTAgPiAiJFJPT1QvZXRjL3Byb3Zpc2lvbmVyL2lkZW50aXR5LmVudiIKIyBUaGUgb3RoZXIgbm9kZXMnIG5hbWVzICgvZXRjL3Byb3Zpc2lvbmVyL2hvc3RzKSByZWFjaCAvZXRjL2hvc3RzIHRocm91Z2ggcHJvdmlzaW9uZXItZmlyZXdhbGwuCmVjaG8gInByb3Zpc2lvbmVyLWlkZW50aXR5OiAkbmFtZSAoJHJvbGUpIgo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-nvme-raid 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBBc3NlbWJsZSBldmVyeSBsb2NhbCBOVk1lIGRhdGEgZGlzayBpbnRvIG9uZSBmaWxlc3lzdGVtIGF0IC9tbnQvY2hlY2twb2ludHMuCiMgICAwIGRpc2tzOiBhIGRpcmVjdG9yeSBvbiB0aGUgcm9vdCBkaXNrICh3aXRoIGEgd2FybmluZyk7IDEgZGlzazogZm9ybWF0dGVkIGRpcmVjdGx5OwojICAgTiBkaXNrczogbWRhZG0gUkFJRDAgKC9kZXYvbWQvY2hlY2twb2ludHMpLiBJZGVtcG90ZW50OiBhbiBleGlzdGluZyBtb3VudCBvciBhcnJheSBpcyByZXVzZWQuCiMgVGVzdCBob29rcyAodXNlZCBieSB0aGUgdW5pdCB0ZXN0cywgaGFybWxlc3MgaW4gcHJvZHVjdGlvbik6CiMgICBQUk9WSVNJT05FUl9OVk1FX0RFVklDRVMgIHNwYWNlLXNlcGFyYXRlZCBjYW5kaWRhdGUgZGlza3MgaW5zdGVhZCBvZiBsc2JsayBkaXNjb3ZlcnkKIyAgIFBST1ZJU0lPTkVSX1JPT1RfRElTSyAgICAgdGhlIHJvb3QgZGlzayBpbnN0ZWFkIG9mIGFza2luZyBmaW5kbW50L2xzYmxrCiMgICBQUk9WSVNJT05FUl9EUllfUlVOPTEgICAgIHByaW50IHRoZSBjb21tYW5kcyBpbnN0ZWFkIG9mIHJ1bm5pbmcgdGhlbQpzZXQgLWV1byBwaXBlZmFpbApNT1VOVF9QT0lOVD0ke1BST1ZJU0lPTkVSX01PVU5UX1BPSU5UOi19ClsgLW4gIiRNT1VOVF9QT0lOVCIgXSB8fCBNT1VOVF9QT0lOVD0vbW50L2NoZWNrcG9pbnRzCk1EX0RFVklDRT0vZGV2L21kL2NoZWNrcG9pbnRzCgpydW4oKSB7CiAgICBpZiBbICIke1BST1ZJU0lPTkVSX0RSWV9SVU46LTB9IiA9IDEgXTsgdGhlbiBlY2hvICIrICQqIjsgZWxzZSAiJEAiOyBmaQp9Cgpyb290X2Rpc2soKSB7CiAgICBpZiBbIC1uICIke1BST1ZJU0lPTkVSX1JPT1RfRElTSzotfSIgXTsgdGhlbiBlY2hvICIkUFJPVklTSU9ORVJfUk9PVF9ESVNLIjsgcmV0dXJuOyBmaQogICAgbG9jYWwgc3JjIHBhcmVudAogICAgc3JjPSQoZmluZG1udCAtbm8gU09VUkNFIC8gfHwgdHJ1ZSkKICAgIHBhcmVudD0kKGxzYmxrIC1ubyBQS05BTUUgIiRzcmMiIDI+L2Rldi9udWxsIHwgaGVhZCAtbiAxIHx8IHRydWUpCiAgICBpZiBbIC1uICIkcGFyZW50IiBdOyB0aGVuIGVjaG8gIi9kZXYvJHBhcmVudCI7IGVsc2UgZWNobyAiJHNyYyI7IGZpCn0KCmNhbmRpZGF0ZXMoKSB7CiAgICBpZiBbIC1uICIke1BST1ZJU0lPTkVSX05WTUVfREVWSUNFUytzZXR9IiBdOyB0aGVuCiAgICAgICAgZm9yIGRldiBpbiAkUFJPVklTSU9ORVJfTlZNRV9ERVZJQ0VTOyBkbyBlY2hvICIkZGV2IjsgZG9uZQogICAgICAgIHJldHVybgogICAgZmkKICAgICMgV2hvbGUgTlZNZSBkaXNrcyB3aXRoIG5vIHBhcnRpdGlvbnMgYW5kIG5vIGZpbGVzeXN0ZW0gbW91bnRlZCBmcm9tIHRoZW0uCiAgICBsc2JsayAtZHBubyBOQU1FLFRZUEUgfCBhd2sgJyQyID09ICJkaXNrIiAmJiAkMSB+IC9cL252bWVbMC05XStuWzAtOV0rJC8ge3ByaW50ICQxfScgfCB3aGlsZSByZWFkIC1yIGRldjsgZG8KICAgICAgICBpZiBbICIkKGxzYmxrIC1ubyBOQU1FICIkZGV2IiB8IHdjIC1sKSIgLWVxIDEgXSAmJiBbIC16ICIkKGxzYmxrIC1ubyBNT1VOVFBPSU5UICIkZGV2IiB8IHRyIC1kICdbOnNwYWNlOl0nKSIgXTsgdGhlbgogICAgICAgICAgICBlY2hvICIkZGV2IgogICAgICAgIGZpCiAgICBkb25lCn0KCmlmIFsgIiR7UFJPVklTSU9ORVJfRFJZX1JVTjotMH0iICE9IDEgXSAmJiBtb3VudHBvaW50IC1xICIkTU9VTlRfUE9JTlQiOyB0aGVuCiAgICBlY2hvICJudm1lLXJhaWQ6ICRNT1VOVF9QT0lOVCBhbHJlYWR5IG1vdW50ZWQiCiAgICBleGl0IDAKZmkKClJPT1Q9JChyb290X2Rpc2spCkRJU0tTPSgpCkNPVU5UPTAKZm9yIGRldiBpbiAkKGNhbmRpZGF0ZXMpOyBkbwogICAgaWYgWyAiJGRldiIgPSAiJFJPT1QiIF07IHRoZW4gY29udGludWU7IGZpCiAgICBESVNLUys9KCIkZGV2IikKICAgIENPVU5UPSQoKENPVU5UICsgMSkpCmRvbmUKCnJ1biBta2RpciAtcCAiJE1PVU5UX1BPSU5UIgpjYXNlICRDT1VOVCBpbgogICAgMCkKICAgICAgICBlY2hvICJudm1lLXJhaWQ6IFdBUk5JTkc6IG5vIGxvY2FsIE5WTWUgZGF0YSBkaXNrOyAkTU9VTlRfUE9JTlQgaXMgb24gdGhlIHJvb3QgZGlzayIgPiYyCiAgICAgICAgZXhpdCAwCiAgICAgICAgOzsKICAgIDEpCiAgICAgICAgVEFSR0VUPSIke0RJU0tTWzBdfSIKICAgICAgICA7OwogICAgKikKICAgICAgICBpZiBbICIke1BST1ZJU0lPTkVSX0RSWV9SVU46LTB9IiAhPSAxIF0gJiYgWyAtZSAiJE1EX0RFVklDRSIgXTsgdGhlbgogICAgICAgICAgICBUQVJHRVQ9IiRNRF9ERVZJQ0UiCiAgICAgICAgZWxzZQogICAgICAgICAgICBydW4gbWRhZG0gLS1jcmVhdGUgIiRNRF9ERVZJQ0UiIC0tcnVuIC0tbGV2ZWw9MCAtLWNodW5rPTUxMiAtLXJhaWQtZGV2aWNlcz0kQ09VTlQgIiR7RElTS1NbQF19IgogICAgICAgICAgICBUQVJHRVQ9IiRNRF9ERVZJQ0UiCiAgICAgICAgZmkKICAgICAgICA7Owplc2FjCmVjaG8gIm52bWUtcmFpZDogJENPVU5UIGRpc2socyk6ICR7RElTS1NbKl19IC0+ICRUQVJHRVQiCmlmIFsgIiR7UFJPVklTSU9ORVJfRFJZX1JVTjotMH0iID0gMSBdIHx8ICEgYmxraWQgLW8gdmFsdWUgLXMgVFlQRSAiJFRBUkdFVCIgPi9kZXYvbnVsbCAyPiYxOyB0aGVuCiAgICBydW4gbWtmcy5leHQ0IC1GIC1xIC1MIGNoZWNrcG9pbnRzIC1FIGxhenlfaXRhYmxlX2luaXQ9MSxsYXp5X2pvdXJuYWxfaW5pdD0xIC1tIDAgIiRUQVJHRVQiCmZpCnJ1biBtb3VudCAtbyBub2F0aW1lLGRpc2NhcmQgIiRUQVJHRVQiICIkTU9VTlRfUE9JTlQiCnJ1biBjaG1vZCAxNzc3ICIkTU9VTlRfUE9JTlQiCg==
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-nvme.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUFzc2VtYmxlIGxvY2FsIE5WTWUgaW50byAvbW50L2NoZWNrcG9pbnRzCkJlZm9yZT1zbHVybWQuc2VydmljZSBrM3Muc2VydmljZSBrM3MtYWdlbnQuc2VydmljZSBuZnMtc2VydmVyLnNlcnZpY2UKW1NlcnZpY2VdClR5cGU9b25lc2hvdApSZW1haW5BZnRlckV4aXQ9eWVzCkV4ZWNTdGFydD0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItbnZtZS1yYWlkCltJbnN0YWxsXQpXYW50ZWRCeT1tdWx0aS11c2VyLnRhcmdldAo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-gpu-check 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBQcmVzZW5jZSBjaGVja3MgZm9yIHRoZSBHUFUgc3RhY2ssIGxvZ2dlZCB0byAvdmFyL2xvZy9wcm92aXNpb25lci9ncHUtY2hlY2subG9nLgojIEV4aXQgMSBvbiBhIG1pc3NpbmcgZHJpdmVyLCBhIHdyb25nIEdQVSBjb3VudCwgKDgtR1BVIFNYTSBib2FyZHMpIGEgc3RvcHBlZCBmYWJyaWMgbWFuYWdlcgojIG9yIChLdWJlcm5ldGVzKSBubyBOVklESUEgY29udGFpbmVyIHJ1bnRpbWU7IGxhdGVyIG5vZGUgdmFsaWRhdGlvbiBkcmFpbnMgc3VjaCBhIG5vZGUKIyByYXRoZXIgdGhhbiB0aGlzIGJvb3Qgc2NyaXB0LgpzZXQgLXUKbWtkaXIgLXAgL3Zhci9sb2cvcHJvdmlzaW9uZXIKZXhlYyA+ID4odGVlIC1hIC92YXIvbG9nL3Byb3Zpc2lvbmVyL2dwdS1jaGVjay5sb2cpIDI+JjEKc3RhdHVzPTAKaWYgISBjb21tYW5kIC12IG52aWRpYS1zbWkgPi9kZXYvbnVsbDsgdGhlbgogICAgZWNobyAiZ3B1LWNoZWNrOiBGQUlMIG52aWRpYS1zbWkgbm90IGZvdW5kIChubyBOVklESUEgZHJpdmVyIG9uIHRoZSBpbWFnZSkiCiAgICBleGl0IDEKZmkKY291bnQ9JChudmlkaWEtc21pIC1MIDI+L2Rldi9udWxsIHwgZ3JlcCAtYyAnXkdQVSAnIHx8IHRydWUpCmlmIFsgIiRjb3VudCIgLW5lIDggXTsgdGhlbgogICAgZWNobyAiZ3B1LWNoZWNrOiBGQUlMIGZvdW5kICRjb3VudCBHUFUocyksIGV4cGVjdGVkIDggeCIgSDIwMAogICAgc3RhdHVzPTEKZWxzZQogICAgZWNobyAiZ3B1LWNoZWNrOiBvayAkY291bnQgR1BVKHMpIgpmaQojIDgtR1BVIE5WU3dpdGNoIGJvYXJkcyBuZWVkIG52aWRpYS1mYWJyaWNtYW5hZ2VyIG9yIENVREEgaW5pdCBmYWlscyB3aXRoIGVycm9yIDgwMi4KaWYgISBzeXN0ZW1jdGwgaXMtYWN0aXZlIC0tcXVpZXQgbnZpZGlhLWZhYnJpY21hbmFnZXI7IHRoZW4KICAgIHN5c3RlbWN0bCBlbmFibGUgLS1ub3cgbnZpZGlhLWZhYnJpY21hbmFnZXIgfHwgdHJ1ZQpmaQppZiBzeXN0ZW1jdGwgaXMtYWN0aXZlIC0tcXVpZXQgbnZpZGlhLWZhYnJpY21hbmFnZXI7IHRoZW4KICAgIGVjaG8gImdwdS1jaGVjazogb2sgbnYtZmFicmljbWFuYWdlciBhY3RpdmUiCmVsc2UKICAgIGVjaG8gImdwdS1jaGVjazogRkFJTCBudi1mYWJyaWNtYW5hZ2VyIGlzIG5vdCBydW5uaW5nIgogICAgc3RhdHVzPTEKZmkKIyBOb2RlIHZhbGlkYXRpb24gKGRvY3MvdmFsaWRhdGlvbi5tZCkgd2hlcmUgdGhlIGltYWdlIGhhcyB0aGUgcHJvdmlzaW9uZXIgcGFja2FnZTogR1BVIGhlYWx0aCwKIyBYSURzLCBOVkxpbmssIERDR00gYW5kIGEgfjY1IHMgYnVybi1pbiwgYmVmb3JlIHNsdXJtZC9rM3Mgc3RhcnQuIEZhaWxlZCAoZXhpdCAxMSkgZmFpbHMgdGhpcwojIGNoZWNrOyBkZWdyYWRlZCAoMTApIGlzIGxvZ2dlZCBhbmQgbGVmdCB0byBgcHJvdmlzaW9uZXIgdmFsaWRhdGVgLiBJbWFnZXMgd2l0aG91dCB0aGUgcGFja2FnZQojIGtlZXAgdGhlIHByZXNlbmNlIGNoZWNrcyBhYm92ZSBvbmx5LgppZiBjb21tYW5kIC12IHByb3Zpc2lvbmVyID4vZGV2L251bGw7IHRoZW4KICAgIHByb3Zpc2lvbmVyIG5vZGUgY2hlY2sgLS1leHBlY3QtZ3B1cyA4IC0tZXhwZWN0LW1vZGVsIEgyMDAgXAogICAgICAgIC0tanNvbiAtbyAvdmFyL2xvZy9wcm92aXNpb25lci9ub2RlLWNoZWNrLmpzb24KICAgIGNhc2UgJD8gaW4KICAgICAgICAwKSBlY2hvICJncHUtY2hlY2s6IG9rIG5vZGUgY2hlY2sgaGVhbHRoeSIgOzsKICAgICAgICAxMCkgZWNobyAiZ3B1LWNoZWNrOiBXQVJOIG5vZGUgY2hlY2sgZGVncmFkZWQgKC92YXIvbG9nL3Byb3Zpc2lvbmVyL25vZGUtY2hlY2suanNvbikiIDs7CiAgICAgICAgKikgZWNobyAiZ3B1LWNoZWNrOiBGQUlMIG5vZGUgY2hlY2sgZmFpbGVkICgvdmFyL2xvZy9wcm92aXNpb25lci9ub2RlLWNoZWNrLmpzb24pIjsgc3RhdHVzPTEgOzsKICAgIGVzYWMKZmkKZXhpdCAkc3RhdHVzCg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-health 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBOb2RlIGhlYWx0aCB3YXRjaCAoZG9jcy9oZWFsaW5nLm1kKTogYHByb3Zpc2lvbmVyIG5vZGUgd2F0Y2hgIGV2ZXJ5IDMwIHMsIHRoZSBjaGVja3Mgb2YKIyBgbm9kZSBjaGVjayAtLW5vLWJ1cm5pbmAgKG9uZSBpbXBsZW1lbnRhdGlvbik7IG9uIGEgZmFpbGVkIGZpbmRpbmcgaXQgZHJhaW5zIHRoaXMgbm9kZSB3aXRoIHRoZQojIGZpbmRpbmcncyBjb2RlLCBuZXZlciB0aGUgbGFzdCBub2RlIGluIHNlcnZpY2UuIFJlcG9ydHM6IC92YXIvbGliL3Byb3Zpc2lvbmVyL2hlYWx0aC9OT0RFLmpzb24uCiMgSW1hZ2VzIHdpdGhvdXQgdGhlIHByb3Zpc2lvbmVyIHBhY2thZ2UgZ2V0IG5vIHdhdGNoIChzYWlkIG9uY2UsIGhlcmUsIHRoZW4gaWRsZSkuCnNldCAtdQpta2RpciAtcCAvdmFyL2xvZy9wcm92aXNpb25lciAvdmFyL2xpYi9wcm92aXNpb25lci9oZWFsdGgKaWYgISBjb21tYW5kIC12IHByb3Zpc2lvbmVyID4vZGV2L251bGw7IHRoZW4KICAgIGVjaG8gInByb3Zpc2lvbmVyLWhlYWx0aDogdGhlIHByb3Zpc2lvbmVyIHBhY2thZ2UgaXMgbm90IG9uIHRoaXMgaW1hZ2U7IG5vIGhlYWx0aCB3YXRjaCBvbiB0aGlzIG5vZGUiCiAgICBleGVjIHNsZWVwIGluZmluaXR5CmZpCi4gL2V0Yy9wcm92aXNpb25lci9pZGVudGl0eS5lbnYKZXhlYyBwcm92aXNpb25lciBub2RlIHdhdGNoIC0tbm9kZSAiJE5PREVfTkFNRSIgLS12aWEgc2x1cm0gXAogICAgLS1pbnRlcnZhbC1zIDMwIC0tZXhwZWN0LWdwdXMgOCAtLWV4cGVjdC1tb2RlbCBIMjAwIFwKICAgIC0tc3BvdCBub25lIFwKICAgIC0tcmVwb3J0LWRpciAvdmFyL2xpYi9wcm92aXNpb25lci9oZWFsdGgK
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-health.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPU5vZGUgaGVhbHRoIHdhdGNoIChkcmFpbnMgdGhpcyBub2RlIG9uIGEgZmFpbGVkIEdQVSBmaW5kaW5nIG9yIGEgc3BvdCByZWNsYWltIG5vdGljZSkKQWZ0ZXI9c2x1cm1kLnNlcnZpY2UgazNzLnNlcnZpY2UgazNzLWFnZW50LnNlcnZpY2UKW1NlcnZpY2VdClR5cGU9c2ltcGxlCkV4ZWNTdGFydD0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItaGVhbHRoClJlc3RhcnQ9YWx3YXlzClJlc3RhcnRTZWM9MTAKW0luc3RhbGxdCldhbnRlZEJ5PW11bHRpLXVzZXIudGFyZ2V0Cg==
PROVISIONER_B64
put_file /etc/profile.d/provisioner-nccl.sh 0644 root:root <<'PROVISIONER_B64'
IyBOQ0NMIHNldHRpbmdzIGZvciB0aGUgZWZhIGZhYnJpYyBvZiBwNWVuLjQ4eGxhcmdlLgpleHBvcnQgRklfRUZBX0ZPUktfU0FGRT0iMSIKZXhwb3J0IEZJX0VGQV9VU0VfREVWSUNFX1JETUE9IjEiCmV4cG9ydCBGSV9QUk9WSURFUj0iZWZhIgpleHBvcnQgTERfTElCUkFSWV9QQVRIPSIvb3B0L2FtYXpvbi9vZmktbmNjbC9saWI6L29wdC9hbWF6b24vZWZhL2xpYiR7TERfTElCUkFSWV9QQVRIOis6JHtMRF9MSUJSQVJZX1BBVEh9fSIKZXhwb3J0IE5DQ0xfREVCVUc9IldBUk4iCmV4cG9ydCBOQ0NMX05FVF9QTFVHSU49Im9maSIKZXhwb3J0IE5DQ0xfU09DS0VUX0lGTkFNRT0iXmxvLGRvY2tlcjAiCmV4cG9ydCBOQ0NMX1RVTkVSX1BMVUdJTj0ib2ZpIgo=
PROVISIONER_B64
put_file /etc/provisioner/nccl.env 0644 root:root <<'PROVISIONER_B64'
IyBLRVk9VkFMVUUgZm9ybSBvZiAvZXRjL3Byb2ZpbGUuZC9wcm92aXNpb25lci1uY2NsLnNoIGZvciBzeXN0ZW1kIEVudmlyb25tZW50RmlsZT0gYW5kIGNvbnRhaW5lcnMuCkZJX0VGQV9GT1JLX1NBRkU9MQpGSV9FRkFfVVNFX0RFVklDRV9SRE1BPTEKRklfUFJPVklERVI9ZWZhCkxEX0xJQlJBUllfUEFUSD0vb3B0L2FtYXpvbi9vZmktbmNjbC9saWI6L29wdC9hbWF6b24vZWZhL2xpYgpOQ0NMX0RFQlVHPVdBUk4KTkNDTF9ORVRfUExVR0lOPW9maQpOQ0NMX1NPQ0tFVF9JRk5BTUU9XmxvLGRvY2tlcjAKTkNDTF9UVU5FUl9QTFVHSU49b2ZpCg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-teardown 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBwcm92aXNpb25lci10ZWFyZG93biBSRUFTT046IGVuZCB0aGlzIG5vZGUgb2YgY2x1c3RlciBoMjAwLWJpZy1kYXRhIG9uIGF3cyBzbyB0aGF0IGl0IHN0b3BzIGJpbGxpbmcuCiMgQVdTOiB0aGUgYWRhcHRlciBsYXVuY2hlcyB3aXRoIEluc3RhbmNlSW5pdGlhdGVkU2h1dGRvd25CZWhhdmlvcj10ZXJtaW5hdGUsIHNvIHBvd2VyaW5nIG9mZiB0ZXJtaW5hdGVzLgojIFRoZSBjcmVkZW50aWFsIGlzIGhhbmRlZCB0byBjdXJsIG9uIHN0ZGluLCBuZXZlciBpbiBhcmd2LCBhbmQgbmV2ZXIgbG9nZ2VkLiBXaGVuIHRoZSBBUEkgY2FsbCBmYWlscwojIHRoZSBub2RlIHBvd2VycyBvZmYgYW55d2F5LiBFeGl0IDAgb25jZSB0aGUgcHJvdmlkZXIgYWNjZXB0ZWQgdGhlIHRlYXJkb3duIChvciBwb3dlcm9mZiBiZWdhbikuCnNldCAtdQpSRUFTT049JHsxOi10dGx9CmNhc2UgJFJFQVNPTiBpbiB0dGwgfCBpZGxlIHwgbWFudWFsKSA7OyAqKSBSRUFTT049bWFudWFsIDs7IGVzYWMKU1RBVEVfRElSPSR7UFJPVklTSU9ORVJfU1RBVEVfRElSOi0vdmFyL2xpYi9wcm92aXNpb25lcn0KbWtkaXIgLXAgIiRTVEFURV9ESVIiIDI+L2Rldi9udWxsIHx8IHRydWUKbG9nKCkgewogICAgbG9nZ2VyIC10IHByb3Zpc2lvbmVyLXRlYXJkb3duIC0tICIkKiIgMj4vZGV2L251bGwgfHwgdHJ1ZQogICAgZWNobyAicHJvdmlzaW9uZXItdGVhcmRvd246ICQqIiA+JjIKfQoKcG93ZXJfb2ZmKCkgeyAgIyBzeXN0ZW1kJ3MgcG93ZXJvZmYsIG9yLCBhcyBhIGNvbnRhaW5lcidzIGVudHJ5cG9pbnQgd2l0aG91dCBzeXN0ZW1kLCBzdG9wIFBJRCAxCiAgICBpZiBbIC1kICIke1BST1ZJU0lPTkVSX1NZU1RFTURfRElSOi0vcnVuL3N5c3RlbWQvc3lzdGVtfSIgXTsgdGhlbgogICAgICAgIHN5c3RlbWN0bCBwb3dlcm9mZgogICAgZWxzZQogICAgICAgIGtpbGwgLVRFUk0gIiR7UFJPVklTSU9ORVJfSU5JVF9QSUQ6LTF9IgogICAgZmkKfQoKbG9nICIkUkVBU09OIGxpbWl0IHJlYWNoZWQ7IHBvd2VyaW5nIG9mZiwgd2hpY2ggdGVybWluYXRlcyB0aGlzIGluc3RhbmNlIgpwb3dlcl9vZmYK
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-deadman 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBEZWFkLW1hbiBzd2l0Y2g6IGVuZCB0aGlzIG5vZGUgb25jZSB0aGUgY2x1c3RlcidzIGxpZmV0aW1lICgzNjAwIG1pbikgaXMgdXAsIHRocm91Z2gKIyBwcm92aXNpb25lci10ZWFyZG93biAod2hpY2ggZG9lcyB3aGF0IHN0b3BzIHRoZSBiaWxsIG9uIGF3cykuCiMgVGhlIGRlYWRsaW5lIGlzIGZpeGVkIG9uIGZpcnN0IGJvb3QsIHNvIHJlYm9vdHMgYW5kIHJlc3RhcnRzIGRvIG5vdCBleHRlbmQgaXQ7IGFuIGFic29sdXRlIG9uZQojIChlcG9jaCBzZWNvbmRzKSBpbiBQUk9WSVNJT05FUl9ERUFETElORSwgc2V0IGJ5IHdob2V2ZXIgbGF1bmNoZWQgdGhlIG5vZGUgKGEgcG9kJ3MgZW52aXJvbm1lbnQsCiMgdGhlIFNTSCBydW5uZXIpLCB3aW5zOiBhIGNvbnRhaW5lciB3aG9zZSBkaXNrIGlzIHdpcGVkIG9uIHJlc3RhcnQga2VlcHMgaXQgdG9vLgpzZXQgLWV1ClNUQVRFX0RJUj0ke1BST1ZJU0lPTkVSX1NUQVRFX0RJUjotL3Zhci9saWIvcHJvdmlzaW9uZXJ9CkRFQURMSU5FX0ZJTEU9JFNUQVRFX0RJUi9kZWFkbGluZQpub3c9JChkYXRlICslcykKaWYgW1sgIiR7UFJPVklTSU9ORVJfREVBRExJTkU6LX0iID1+IF5bMC05XXsxLDEyfSQgXV07IHRoZW4KICAgIG1rZGlyIC1wICIkU1RBVEVfRElSIgogICAgZWNobyAiJFBST1ZJU0lPTkVSX0RFQURMSU5FIiA+ICIkREVBRExJTkVfRklMRSIKZWxpZiAhIFtbICIkKGNhdCAiJERFQURMSU5FX0ZJTEUiIDI+L2Rldi9udWxsKSIgPX4gXlswLTldKyQgXV07IHRoZW4KICAgIG1rZGlyIC1wICIkU1RBVEVfRElSIgogICAgZWNobyAkKCggbm93ICsgMzYwMCAqIDYwICkpID4gIiRERUFETElORV9GSUxFIgpmaQppZiBbICIkbm93IiAtZ2UgIiQoY2F0ICIkREVBRExJTkVfRklMRSIpIiBdOyB0aGVuCiAgICBsb2dnZXIgLXQgcHJvdmlzaW9uZXItZGVhZG1hbiAibGlmZXRpbWUgb2YgMzYwMCBtaW4gcmVhY2hlZCIgMj4vZGV2L251bGwgfHwgdHJ1ZQogICAgZXhlYyAiJHtQUk9WSVNJT05FUl9URUFSRE9XTjotL3Vzci9sb2NhbC9zYmluL3Byb3Zpc2lvbmVyLXRlYXJkb3dufSIgdHRsCmZpCg==
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-deadman.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUVuZCB0aGlzIG5vZGUgd2hlbiB0aGUgY2x1c3RlciBsaWZldGltZSAoMzYwMCBtaW4pIGlzIG92ZXIKW1NlcnZpY2VdClR5cGU9b25lc2hvdApFeGVjU3RhcnQ9L3Vzci9sb2NhbC9zYmluL3Byb3Zpc2lvbmVyLWRlYWRtYW4K
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-deadman.timer 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUVuZCB0aGlzIG5vZGUgd2hlbiB0aGUgY2x1c3RlciBsaWZldGltZSAoMzYwMCBtaW4pIGlzIG92ZXIsIGV2ZXJ5IG1pbnV0ZQpbVGltZXJdCk9uQm9vdFNlYz0xbWluCk9uVW5pdEFjdGl2ZVNlYz0xbWluCkFjY3VyYWN5U2VjPTMwcwpbSW5zdGFsbF0KV2FudGVkQnk9dGltZXJzLnRhcmdldAo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-shared-fs 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBNb3VudCB0aGUgcHJvdmlkZXIncyBtYW5hZ2VkIHNoYXJlZCBmaWxlc3lzdGVtIGF0IC9zaGFyZWQuCiMgVGhlIGZpbGVzeXN0ZW0gaXMgY3JlYXRlZCBieSB0aGUgc3RhY2sgYWZ0ZXIgdGhpcyBmaWxlIGlzIHJlbmRlcmVkLCBzbyBpdHMgYWRkcmVzcyBpcyByZWFkCiMgYXQgYm9vdCBmcm9tIC9ldGMvcHJvdmlzaW9uZXIvc2hhcmVkLWZzLmVudiAoU0hBUkVEX0ZTX1RBUkdFVD0uLi4pLCB3aGljaCB0aGUgc3RhY2sgd3JpdGVzLgpzZXQgLWV1Ck1PVU5UX1BPSU5UPS9zaGFyZWQKRU5WX0ZJTEU9L2V0Yy9wcm92aXNpb25lci9zaGFyZWQtZnMuZW52CmZvciBfIGluICQoc2VxIDEgNjApOyBkbyBbIC1mICIkRU5WX0ZJTEUiIF0gJiYgYnJlYWs7IHNsZWVwIDEwOyBkb25lCmlmIFsgISAtZiAiJEVOVl9GSUxFIiBdOyB0aGVuCiAgICBlY2hvICJzaGFyZWQtZnM6ICRFTlZfRklMRSBuZXZlciBhcHBlYXJlZDsgJE1PVU5UX1BPSU5UIGlzIG5vdCBtb3VudGVkIiA+JjIKICAgIGV4aXQgMQpmaQouICIkRU5WX0ZJTEUiCm1rZGlyIC1wICIkTU9VTlRfUE9JTlQiCiMgRlN4IGZvciBMdXN0cmU6IFNIQVJFRF9GU19UQVJHRVQ9ZnMtMDEyMy5mc3gudXMtZWFzdC0xLmFtYXpvbmF3cy5jb21AdGNwOi9tb3VudG5hbWUKYXB0LWdldCBpbnN0YWxsIC15ICJsdXN0cmUtY2xpZW50LW1vZHVsZXMtJCh1bmFtZSAtcikiIHx8IGFwdC1nZXQgaW5zdGFsbCAteSBsdXN0cmUtY2xpZW50LW1vZHVsZXMtYXdzCmVjaG8gIiRTSEFSRURfRlNfVEFSR0VUICRNT1VOVF9QT0lOVCBsdXN0cmUgZGVmYXVsdHMsbm9hdGltZSxmbG9jayxfbmV0ZGV2LG5vZmFpbCAwIDAiID4+IC9ldGMvZnN0YWIKbW91bnQgIiRNT1VOVF9QT0lOVCIK
PROVISIONER_B64
if begin_step 00-packages 0; then
    if install_packages curl mdadm nfs-common nftables munge slurm-client slurmd slurmctld; then end_step 00-packages; else
        log "step 00-packages: FAILED; nothing else can run"
        exit 1
    fi
fi
put_file /etc/slurm/cgroup.conf 0644 root:root <<'PROVISIONER_B64'
IyBjZ3JvdXAuY29uZiBmb3IgY2x1c3RlciBoMjAwLWJpZy1kYXRhOiBjb25maW5lIGpvYnMgdG8gdGhlIGNvcmVzLCBtZW1vcnkgYW5kIEdQVXMgdGhleSBhc2tlZCBmb3IuCkNvbnN0cmFpbkNvcmVzPXllcwpDb25zdHJhaW5SQU1TcGFjZT15ZXMKQ29uc3RyYWluU3dhcFNwYWNlPXllcwpDb25zdHJhaW5EZXZpY2VzPXllcwpBbGxvd2VkUkFNU3BhY2U9MTAwCkFsbG93ZWRTd2FwU3BhY2U9MAo=
PROVISIONER_B64
put_file /etc/slurm/epilog.sh 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBTbHVybSBlcGlsb2cgZm9yIGNsdXN0ZXIgaDIwMC1iaWctZGF0YTogcnVucyBhcyByb290IG9uIGVhY2ggbm9kZSBhZnRlciBldmVyeSBqb2IuCiMgSWYgYSBub2RlIHZhbGlkYXRvciBpcyBpbnN0YWxsZWQgYW5kIHJlcG9ydHMgYSBmYXVsdCwgZHJhaW4gdGhpcyBub2RlIHNvIG5vIGZ1cnRoZXIgam9iIGxhbmRzCiMgb24gYmFkIGhhcmR3YXJlLiBUaGUgZXBpbG9nIGl0c2VsZiBhbHdheXMgZXhpdHMgMDogYSBmYWlsaW5nIGVwaWxvZyB3b3VsZCBkcmFpbiB0aGUgbm9kZSB3aXRoCiMgYSBsZXNzIHVzZWZ1bCByZWFzb24uClZBTElEQVRPUj0iJHtQUk9WSVNJT05FUl9WQUxJREFUT1I6LS91c3IvbG9jYWwvYmluL3Byb3Zpc2lvbmVyLXZhbGlkYXRlLW5vZGV9IgpTQ09OVFJPTD0iJHtQUk9WSVNJT05FUl9TQ09OVFJPTDotc2NvbnRyb2x9IgpOT0RFPSIke1NMVVJNRF9OT0RFTkFNRTotJChob3N0bmFtZSAtcyl9IgoKaWYgWyAteCAiJFZBTElEQVRPUiIgXTsgdGhlbgogICAgaWYgISBvdXRwdXQ9JCh0aW1lb3V0IDMwMCAiJFZBTElEQVRPUiIgLS1hZnRlci1qb2IgIiR7U0xVUk1fSk9CX0lEOi0wfSIgMj4mMSk7IHRoZW4KICAgICAgICByZWFzb249JChwcmludGYgJyVzJyAiJG91dHB1dCIgfCB0YWlsIC1uIDEgfCB0ciAtY2QgJ1s6YWxudW06XSAuXzo9Ly0nIHwgY3V0IC1jMS0xMjApCiAgICAgICAgIiRTQ09OVFJPTCIgdXBkYXRlIG5vZGVuYW1lPSIkTk9ERSIgc3RhdGU9ZHJhaW4gcmVhc29uPSJ2YWxpZGF0b3IgZmFpbGVkOiAke3JlYXNvbjotdW5rbm93bn0iCiAgICAgICAgbG9nZ2VyIC10IHByb3Zpc2lvbmVyLWVwaWxvZyAiZHJhaW5lZCAkTk9ERSBhZnRlciBqb2IgJHtTTFVSTV9KT0JfSUQ6LT99OiAke3JlYXNvbjotdW5rbm93bn0iCiAgICBmaQpmaQpleGl0IDAK
PROVISIONER_B64
put_file /etc/slurm/gres.conf 0644 root:root <<'PROVISIONER_B64'
IyBncmVzLmNvbmYgZm9yIGNsdXN0ZXIgaDIwMC1iaWctZGF0YTogOCB4IEgyMDAgcGVyIG5vZGUuCkF1dG9EZXRlY3Q9b2ZmCk5vZGVOYW1lPWgyMDAtYmlnLWRhdGEtWzAtM10gTmFtZT1ncHUgVHlwZT1oMjAwIEZpbGU9L2Rldi9udmlkaWFbMC03XQo=
PROVISIONER_B64
put_file /etc/slurm/slurm.conf 0644 root:root <<'PROVISIONER_B64'
IyBzbHVybS5jb25mIGZvciBjbHVzdGVyIGgyMDAtYmlnLWRhdGE6IDQgeCBwNWVuLjQ4eGxhcmdlIChhd3MgdXMtZWFzdC0xKQojIFJlbmRlcmVkIGJ5IHByb3Zpc2lvbmVyIGZyb20gcGxhbi5qc29uOyBlZGl0IHRoZSBzcGVjLCBub3QgdGhpcyBmaWxlLgpDbHVzdGVyTmFtZT1oMjAwX2JpZ19kYXRhClNsdXJtY3RsZEhvc3Q9aDIwMC1iaWctZGF0YS0wClNsdXJtVXNlcj1zbHVybQpTbHVybWRVc2VyPXJvb3QKQXV0aFR5cGU9YXV0aC9tdW5nZQpDcmVkVHlwZT1jcmVkL211bmdlClNsdXJtY3RsZFBvcnQ9NjgxNwpTbHVybWRQb3J0PTY4MTgKU3RhdGVTYXZlTG9jYXRpb249L3Zhci9zcG9vbC9zbHVybWN0bGQKU2x1cm1kU3Bvb2xEaXI9L3Zhci9zcG9vbC9zbHVybWQKU2x1cm1jdGxkUGlkRmlsZT0vcnVuL3NsdXJtY3RsZC5waWQKU2x1cm1kUGlkRmlsZT0vcnVuL3NsdXJtZC5waWQKU2x1cm1jdGxkTG9nRmlsZT0vdmFyL2xvZy9zbHVybS9zbHVybWN0bGQubG9nClNsdXJtZExvZ0ZpbGU9L3Zhci9sb2cvc2x1cm0vc2x1cm1kLmxvZwpQcm9jdHJhY2tUeXBlPXByb2N0cmFjay9jZ3JvdXAKVGFza1BsdWdpbj10YXNrL2Nncm91cCx0YXNrL2FmZmluaXR5ClJldHVyblRvU2VydmljZT0yCiMgQSBiYXRjaCBqb2Igd2hvc2Ugbm9kZSBmYWlscyBnb2VzIGJhY2sgdG8gcGVuZGluZyAoYnVyc3Qgc3VibWl0cyB3aXRoIC0tcmVxdWV1ZTsgZG9jcy9oZWFsaW5nLm1kKS4KSm9iUmVxdWV1ZT0xClNjaGVkdWxlclR5cGU9c2NoZWQvYmFja2ZpbGwKU2VsZWN0VHlwZT1zZWxlY3QvY29uc190cmVzClNlbGVjdFR5cGVQYXJhbWV0ZXJzPUNSX0NvcmVfTWVtb3J5Ck1waURlZmF1bHQ9bm9uZQpQcm9wYWdhdGVSZXNvdXJjZUxpbWl0c0V4Y2VwdD1NRU1MT0NLCkpvYkNvbXBUeXBlPWpvYmNvbXAvbm9uZQpBY2NvdW50aW5nU3RvcmFnZVR5cGU9YWNjb3VudGluZ19zdG9yYWdlL25vbmUKSm9iQWNjdEdhdGhlclR5cGU9am9iYWNjdF9nYXRoZXIvbm9uZQpUb3BvbG9neVBsdWdpbj10b3BvbG9neS90cmVlCkdyZXNUeXBlcz1ncHUKRXBpbG9nPS9ldGMvc2x1cm0vZXBpbG9nLnNoCktpbGxXYWl0PTMwClVua2lsbGFibGVTdGVwVGltZW91dD0xODAKU2x1cm1jdGxkVGltZW91dD0xMjAKU2x1cm1kVGltZW91dD0zMDAKIyBDUFVzIGFuZCBSZWFsTWVtb3J5IChNaUIsIE9TIGhlYWRyb29tIGtlcHQgYmFjaykgY29tZSBmcm9tIHRoZSBwcmljZWQgb2ZmZXIuCk5vZGVOYW1lPWgyMDAtYmlnLWRhdGEtWzAtM10gQ1BVcz0xOTIgUmVhbE1lbW9yeT0xOTkyMjk0IEdyZXM9Z3B1OmgyMDA6OCBTdGF0ZT1VTktOT1dOClBhcnRpdGlvbk5hbWU9Z3B1IE5vZGVzPUFMTCBEZWZhdWx0PVlFUyBNYXhUaW1lPUlORklOSVRFIFN0YXRlPVVQCg==
PROVISIONER_B64
put_file /etc/slurm/topology.conf 0644 root:root <<'PROVISIONER_B64'
IyB0b3BvbG9neS5jb25mIGZvciBjbHVzdGVyIGgyMDAtYmlnLWRhdGEgKHRvcG9sb2d5L3RyZWUpLgpTd2l0Y2hOYW1lPXN3MCBOb2Rlcz1oMjAwLWJpZy1kYXRhLTAsaDIwMC1iaWctZGF0YS0xLGgyMDAtYmlnLWRhdGEtMixoMjAwLWJpZy1kYXRhLTMK
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
if begin_step provisioner-shared-fs-a9ed328e6f 0; then
    if /usr/local/sbin/provisioner-shared-fs; then end_step provisioner-shared-fs-a9ed328e6f; else fail_step provisioner-shared-fs-a9ed328e6f $? 0; fi
fi
if begin_step systemctl-c60a340166 1; then
    if systemctl enable --now provisioner-health.service; then end_step systemctl-c60a340166; else fail_step systemctl-c60a340166 $? 0; fi
fi
if [ "$FAILED" = 0 ]; then
    log 'provisioner: head node of h200-big-data bootstrapped'
else
    log "some steps failed; see above"
fi
if [ $$ = 1 ]; then
    log "staying in the foreground as the container's init"
    trap 'exit 0' TERM INT
    while :; do sleep 3600 & wait $! || true; done
fi
exit "$FAILED"
