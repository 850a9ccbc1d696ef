#!/bin/bash
# provisioner bootstrap: head node(s) of cluster lora-finetune (8x_A100_SXM4 on vastai).
# The same bootstrap as cloud-init/head.yaml, for nodes where cloud-init does not run: a
# container pod's entrypoint (no systemd: daemons are started directly) or a VM reached over SSH.
# Idempotent and resumable: a step that succeeded is not run again; run it again after a failure.
# Set PROVISIONER_NODE_NAME to this node's name (lora-finetune-<i>) where the hostname is not it.
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
        remote-fs.target) mount -a -t nfs4 || log "WARN could not mount the shared filesystem" ;;
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
}

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

log 'head node of lora-finetune,' "systemd: $HAVE_SYSTEMD"
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
put_file /etc/provisioner/firewall.nft 0644 root:root <<'PROVISIONER_B64'
IyEvdXNyL3NiaW4vbmZ0IC1mCiMgTm9kZSBmaXJld2FsbCBmb3IgY2x1c3RlciBsb3JhLWZpbmV0dW5lOiBTU0ggb25seSBmcm9tIGFjY2Vzcy5hbGxvd2VkX2NpZHJzIGFuZCB0aGUgY2x1c3RlcidzIG93bgojIG5vZGVzOyBTbHVybSwgazNzIGFuZCBORlMgZGFlbW9ucyBvbmx5IGZyb20gdGhlIGNsdXN0ZXIncyBvd24gbm9kZXMgKGFuZCBrM3MncyBwb2QgYW5kIHNlcnZpY2UgbmV0d29ya3MpLgojIFRoZSBub2RlIGFkZHJlc3NlcyBhcmUgYWRkZWQgYXQgYm9vdCBieSBwcm92aXNpb25lci1maXJld2FsbCBmcm9tIC9ldGMvcHJvdmlzaW9uZXIvaG9zdHMgKHRoZQojIGNsdXN0ZXIgc2V0cyBiZWxvdyBob2xkIG9ubHkgd2hhdCBpcyBrbm93biBiZWZvcmUgYm9vdCkuIE90aGVyIHRyYWZmaWMgaXMgbGVmdCB0byB0aGUgcHJvdmlkZXIncyBmaXJld2FsbCAocG9saWN5CiMgYWNjZXB0KSwgc28gcHJvdmlkZXIgYWdlbnRzIGFuZCBESENQIGtlZXAgd29ya2luZy4gTG9hZGluZyB0aGlzIGZpbGUgYWdhaW4gcmVwbGFjZXMgdGhlIHRhYmxlCiMgYXRvbWljYWxseSAoaWRlbXBvdGVudCkuCnRhYmxlIGluZXQgcHJvdmlzaW9uZXIKZGVsZXRlIHRhYmxlIGluZXQgcHJvdmlzaW9uZXIKdGFibGUgaW5ldCBwcm92aXNpb25lciB7CiAgICBzZXQgc3NoX3Y0IHsKICAgICAgICB0eXBlIGlwdjRfYWRkcgogICAgICAgIGZsYWdzIGludGVydmFsCiAgICAgICAgZWxlbWVudHMgPSB7IDAuMC4wLjAvMCB9CiAgICB9CiAgICBzZXQgc3NoX3Y2IHsKICAgICAgICB0eXBlIGlwdjZfYWRkcgogICAgICAgIGZsYWdzIGludGVydmFsCiAgICB9CiAgICBzZXQgY2x1c3Rlcl92NCB7CiAgICAgICAgdHlwZSBpcHY0X2FkZHIKICAgICAgICBmbGFncyBpbnRlcnZhbAogICAgICAgIGVsZW1lbnRzID0geyAxMC40Mi4wLjAvMTUgfQogICAgfQogICAgc2V0IGNsdXN0ZXJfdjYgewogICAgICAgIHR5cGUgaXB2Nl9hZGRyCiAgICAgICAgZmxhZ3MgaW50ZXJ2YWwKICAgIH0KICAgIGNoYWluIGlucHV0IHsKICAgICAgICB0eXBlIGZpbHRlciBob29rIGlucHV0IHByaW9yaXR5IGZpbHRlcjsgcG9saWN5IGFjY2VwdDsKICAgICAgICBpaWYgImxvIiBhY2NlcHQKICAgICAgICBjdCBzdGF0ZSBlc3RhYmxpc2hlZCxyZWxhdGVkIGFjY2VwdAogICAgICAgIHRjcCBkcG9ydCAyMiBpcCBzYWRkciBAc3NoX3Y0IGFjY2VwdAogICAgICAgIHRjcCBkcG9ydCAyMiBpcDYgc2FkZHIgQHNzaF92NiBhY2NlcHQKICAgICAgICB0Y3AgZHBvcnQgMjIgaXAgc2FkZHIgQGNsdXN0ZXJfdjQgYWNjZXB0CiAgICAgICAgdGNwIGRwb3J0IDIyIGlwNiBzYWRkciBAY2x1c3Rlcl92NiBhY2NlcHQKICAgICAgICB0Y3AgZHBvcnQgMjIgY291bnRlciBkcm9wCiAgICAgICAgdGNwIGRwb3J0IHsgMTExLCAyMDQ5LCA2NDQzLCA2ODE3LCA2ODE4LCA2ODE5LCAxMDI1MCB9IGlwIHNhZGRyICE9IEBjbHVzdGVyX3Y0IGNvdW50ZXIgZHJvcAogICAgICAgIHVkcCBkcG9ydCB7IDExMSwgMjA0OSwgODQ3MiB9IGlwIHNhZGRyICE9IEBjbHVzdGVyX3Y0IGNvdW50ZXIgZHJvcAogICAgICAgIHRjcCBkcG9ydCB7IDExMSwgMjA0OSwgNjQ0MywgNjgxNywgNjgxOCwgNjgxOSwgMTAyNTAgfSBpcDYgc2FkZHIgIT0gQGNsdXN0ZXJfdjYgY291bnRlciBkcm9wCiAgICAgICAgdWRwIGRwb3J0IHsgMTExLCAyMDQ5LCA4NDcyIH0gaXA2IHNhZGRyICE9IEBjbHVzdGVyX3Y2IGNvdW50ZXIgZHJvcAogICAgfQp9Cg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-firewall 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBwcm92aXNpb25lci1maXJld2FsbDogYXBwbHkgdGhlIG5vZGUgbGlzdCBvZiBjbHVzdGVyIGxvcmEtZmluZXR1bmUgKC9ldGMvcHJvdmlzaW9uZXIvaG9zdHMsICJJUCBOQU1FIiBsaW5lcykuCiMgLSB0aGUgbm9kZSBmaXJld2FsbDogL2V0Yy9wcm92aXNpb25lci9maXJld2FsbC5uZnQgcGx1cyBldmVyeSBub2RlIGFkZHJlc3MgaW4gdGhlIGNsdXN0ZXIgc2V0cywgb25lIG5mdCB0cmFuc2FjdGlvbjsKIyAtIHRoZSBub2RlIG5hbWVzIGluIC9ldGMvaG9zdHMgKG9uZSBtYXJrZWQgYmxvY2ssIHJlcGxhY2VkKS4KIyBVbnRpbCB0aGUgbGlzdCBleGlzdHMgdGhlIGNsdXN0ZXIgc2V0cyBob2xkIG5vdGhpbmcgKGRhZW1vbnMgYW5zd2VyIHRoaXMgbm9kZSBvbmx5KS4KIyBJZGVtcG90ZW50OyBydW4gYWdhaW4gd2hlbmV2ZXIgdGhlIGxpc3QgY2hhbmdlcyAocHJvdmlzaW9uZXItZmlyZXdhbGwucGF0aCkuIE9ubHkgYWRkcmVzcy1zaGFwZWQKIyB3b3JkcyBmcm9tIHRoZSBsaXN0IGFyZSB1c2VkLiBQcmVmaXggZXZlcnkgcGF0aCB3aXRoICRQUk9WSVNJT05FUl9ST09UICh0ZXN0cykuCnNldCAtZXVvIHBpcGVmYWlsClJPT1Q9JHtQUk9WSVNJT05FUl9ST09UOi19CkhPU1RTPSRST09UL2V0Yy9wcm92aXNpb25lci9ob3N0cwp2ND0oKSB2Nj0oKSBuYW1lcz0oKQppZiBbIC1yICIkSE9TVFMiIF07IHRoZW4KICAgIHdoaWxlIHJlYWQgLXIgYWRkciBuYW1lIF87IGRvCiAgICAgICAgY2FzZSAkYWRkciBpbiAnJyB8ICcjJyopIGNvbnRpbnVlIDs7IGVzYWMKICAgICAgICBpZiBbWyAkYWRkciA9fiBeWzAtOV17MSwzfShcLlswLTldezEsM30pezN9JCBdXTsgdGhlbgogICAgICAgICAgICB2NCs9KCIkYWRkciIpCiAgICAgICAgZWxpZiBbWyAkYWRkciA9fiBeWzAtOUEtRmEtZjouXXsyLDQ1fSQgJiYgJGFkZHIgPT0gKjoqIF1dOyB0aGVuCiAgICAgICAgICAgIHY2Kz0oIiRhZGRyIikKICAgICAgICBlbHNlCiAgICAgICAgICAgIGVjaG8gInByb3Zpc2lvbmVyLWZpcmV3YWxsOiBpZ25vcmluZyBhIGxpbmUgb2YgJEhPU1RTIHdob3NlIGZpcnN0IHdvcmQgaXMgbm90IGFuIElQIGFkZHJlc3MiID4mMgogICAgICAgICAgICBjb250aW51ZQogICAgICAgIGZpCiAgICAgICAgaWYgW1sgJHtuYW1lOi19ID1+IF5bQS1aYS16MC05XVtBLVphLXowLTkuLV17MCw2Mn0kIF1dOyB0aGVuIG5hbWVzKz0oIiRhZGRyICRuYW1lIik7IGZpCiAgICBkb25lIDwgIiRIT1NUUyIKZWxzZQogICAgZWNobyAicHJvdmlzaW9uZXItZmlyZXdhbGw6IG5vICRIT1NUUyB5ZXQ7IGNsdXN0ZXIgZGFlbW9ucyBhbnN3ZXIgdGhpcyBub2RlIG9ubHkgdW50aWwgaXQgYXBwZWFycyIgPiYyCmZpCmpvaW4oKSB7IGxvY2FsIElGUz0sOyBlY2hvICIkKiI7IH0KewogICAgY2F0ICIkUk9PVC9ldGMvcHJvdmlzaW9uZXIvZmlyZXdhbGwubmZ0IgogICAgaWYgWyAtbiAiJHt2NFsqXTotfSIgXTsgdGhlbiBlY2hvICJhZGQgZWxlbWVudCBpbmV0IHByb3Zpc2lvbmVyIGNsdXN0ZXJfdjQgeyAkKGpvaW4gIiR7djRbQF19IikgfSI7IGZpCiAgICBpZiBbIC1uICIke3Y2WypdOi19IiBdOyB0aGVuIGVjaG8gImFkZCBlbGVtZW50IGluZXQgcHJvdmlzaW9uZXIgY2x1c3Rlcl92NiB7ICQoam9pbiAiJHt2NltAXX0iKSB9IjsgZmkKfSB8IG5mdCAtZiAtCmlmIFsgLW4gIiR7bmFtZXNbKl06LX0iIF07IHRoZW4KICAgIGV0Y19ob3N0cz0kUk9PVC9ldGMvaG9zdHMKICAgIHsKICAgICAgICBzZWQgJy9eIyBwcm92aXNpb25lciBob3N0cyBiZWdpbiQvLC9eIyBwcm92aXNpb25lciBob3N0cyBlbmQkL2QnICIkZXRjX2hvc3RzIiAyPiAvZGV2L251bGwgfHwgdHJ1ZQogICAgICAgIGVjaG8gJyMgcHJvdmlzaW9uZXIgaG9zdHMgYmVnaW4nCiAgICAgICAgcHJpbnRmICclc1xuJyAiJHtuYW1lc1tAXX0iCiAgICAgICAgZWNobyAnIyBwcm92aXNpb25lciBob3N0cyBlbmQnCiAgICB9ID4gIiRldGNfaG9zdHMucHJvdmlzaW9uZXIiCiAgICBjYXQgIiRldGNfaG9zdHMucHJvdmlzaW9uZXIiID4gIiRldGNfaG9zdHMiICAjIGluIHBsYWNlOiBhIGNvbnRhaW5lcidzIC9ldGMvaG9zdHMgaXMgYSBiaW5kIG1vdW50CiAgICBybSAtZiAiJGV0Y19ob3N0cy5wcm92aXNpb25lciIKZmkKZWNobyAicHJvdmlzaW9uZXItZmlyZXdhbGw6IG5vZGUgYWRkcmVzc2VzIGFwcGxpZWQ6ICR7djRbKl06LX0gJHt2NlsqXTotfSIK
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-firewall.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPU5vZGUgZmlyZXdhbGwsIE5GUyBleHBvcnRzIGFuZCBub2RlIG5hbWVzIG9mIHRoZSBjbHVzdGVyIGZyb20gL2V0Yy9wcm92aXNpb25lci9ob3N0cwpXYW50cz1uZXR3b3JrLXByZS50YXJnZXQKQmVmb3JlPW5ldHdvcmstcHJlLnRhcmdldCBzc2guc2VydmljZSBzbHVybWQuc2VydmljZSBzbHVybWN0bGQuc2VydmljZSBrM3Muc2VydmljZSBrM3MtYWdlbnQuc2VydmljZSBuZnMtc2VydmVyLnNlcnZpY2UKW1NlcnZpY2VdClR5cGU9b25lc2hvdApFeGVjU3RhcnQ9L3Vzci9sb2NhbC9zYmluL3Byb3Zpc2lvbmVyLWZpcmV3YWxsCltJbnN0YWxsXQpXYW50ZWRCeT1tdWx0aS11c2VyLnRhcmdldAo=
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-firewall.path 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUFwcGx5IHRoZSBjbHVzdGVyJ3Mgbm9kZSBsaXN0IGFnYWluIHdoZW5ldmVyIC9ldGMvcHJvdmlzaW9uZXIvaG9zdHMgY2hhbmdlcwpbUGF0aF0KUGF0aENoYW5nZWQ9L2V0Yy9wcm92aXNpb25lci9ob3N0cwpVbml0PXByb3Zpc2lvbmVyLWZpcmV3YWxsLnNlcnZpY2UKW0luc3RhbGxdCldhbnRlZEJ5PW11bHRpLXVzZXIudGFyZ2V0Cg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-identity 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBXb3JrIG91dCB3aGljaCBub2RlIG9mIGNsdXN0ZXIgbG9yYS1maW5ldHVuZSB0aGlzIG1hY2hpbmUgaXMsIGZyb20gdGhlIHByb3ZpZGVyJ3MgbWV0YWRhdGEKIyAodGhlIGluc3RhbmNlIG5hbWUgdGhlIHN0YWNrIGdhdmUgaXQpLCBzZXQgdGhlIGhvc3RuYW1lIHRvIGl0IGFuZCByZWNvcmQgaXQgaW4KIyAvZXRjL3Byb3Zpc2lvbmVyL2lkZW50aXR5LmVudi4gUFJPVklTSU9ORVJfTk9ERV9OQU1FIChzZXQgYnkgdGhlIHN0YWNrIHdoZXJlIHRoZSBwcm92aWRlciBoYXMKIyBubyBpbnN0YW5jZS1uYW1lIG1ldGFkYXRhLCBlLmcuIGEgY29udGFpbmVyIHBvZCdzIGVudmlyb25tZW50KSB3aW5zOyBmYWxscyBiYWNrIHRvIHRoZSBjdXJyZW50CiMgc2hvcnQgaG9zdG5hbWUuCnNldCAtdQpQUkVGSVg9bG9yYS1maW5ldHVuZS0KaXNfbm9kZSgpIHsgW1sgIiQxIiA9PSAiJFBSRUZJWCIqICYmICIkezEjIiRQUkVGSVgifSIgPX4gXlswLTldKyQgXV07IH0KbmFtZT0iJHtQUk9WSVNJT05FUl9OT0RFX05BTUU6LX0iCmlmICEgaXNfbm9kZSAiJG5hbWUiOyB0aGVuCiAgICBuYW1lPSQoaG9zdG5hbWUgLXMpCmZpCmlmICEgaXNfbm9kZSAiJG5hbWUiOyB0aGVuCiAgICBlY2hvICJwcm92aXNpb25lci1pZGVudGl0eTogY2Fubm90IHRlbGwgd2hpY2ggbm9kZSB0aGlzIGlzIChnb3QgJyRuYW1lJykiID4mMgogICAgZXhpdCAxCmZpCmhvc3RuYW1lY3RsIHNldC1ob3N0bmFtZSAiJG5hbWUiIDI+L2Rldi9udWxsIHx8IGhvc3RuYW1lICIkbmFtZSIKcm9sZT13b3JrZXIKWyAiJG5hbWUiID0gbG9yYS1maW5ldHVuZS0wIF0gJiYgcm9sZT1oZWFkCm1rZGlyIC1wIC9ldGMvcHJvdmlzaW9uZXIKcHJpbnRmICdOT0RFX05BTUU9JXNcbk5PREVfUk9MRT0lc1xuSEVBRF9OT0RFPSVzXG4nICIkbmFtZSIgIiRyb2xlIiBsb3JhLWZpbmV0dW5lLTAgPiAvZXRjL3Byb3Zpc2lvbmVyL2lkZW50aXR5LmVudgojIFRoZSBvdGhlciBub2RlcycgbmFtZXMgKC9ldGMvcHJvdmlzaW9uZXIvaG9zdHMpIHJlYWNoIC9ldGMvaG9zdHMgdGhyb3VnaCBwcm92aXNpb25lci1maXJld2FsbC4KZWNobyAicHJvdmlzaW9uZXItaWRlbnRpdHk6ICRuYW1lICgkcm9sZSkiCg==
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-nvme-raid 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBBc3NlbWJsZSBldmVyeSBsb2NhbCBOVk1lIGRhdGEgZGlzayBpbnRvIG9uZSBmaWxlc3lzdGVtIGF0IC9tbnQvY2hlY2twb2ludHMuCiMgICAwIGRpc2tzOiBhIGRpcmVjdG9yeSBvbiB0aGUgcm9vdCBkaXNrICh3aXRoIGEgd2FybmluZyk7IDEgZGlzazogZm9ybWF0dGVkIGRpcmVjdGx5OwojICAgTiBkaXNrczogbWRhZG0gUkFJRDAgKC9kZXYvbWQvY2hlY2twb2ludHMpLiBJZGVtcG90ZW50OiBhbiBleGlzdGluZyBtb3VudCBvciBhcnJheSBpcyByZXVzZWQuCiMgVGVzdCBob29rcyAodXNlZCBieSB0aGUgdW5pdCB0ZXN0cywgaGFybWxlc3MgaW4gcHJvZHVjdGlvbik6CiMgICBQUk9WSVNJT05FUl9OVk1FX0RFVklDRVMgIHNwYWNlLXNlcGFyYXRlZCBjYW5kaWRhdGUgZGlza3MgaW5zdGVhZCBvZiBsc2JsayBkaXNjb3ZlcnkKIyAgIFBST1ZJU0lPTkVSX1JPT1RfRElTSyAgICAgdGhlIHJvb3QgZGlzayBpbnN0ZWFkIG9mIGFza2luZyBmaW5kbW50L2xzYmxrCiMgICBQUk9WSVNJT05FUl9EUllfUlVOPTEgICAgIHByaW50IHRoZSBjb21tYW5kcyBpbnN0ZWFkIG9mIHJ1bm5pbmcgdGhlbQpzZXQgLWV1byBwaXBlZmFpbApNT1VOVF9QT0lOVD0ke1BST1ZJU0lPTkVSX01PVU5UX1BPSU5UOi19ClsgLW4gIiRNT1VOVF9QT0lOVCIgXSB8fCBNT1VOVF9QT0lOVD0vbW50L2NoZWNrcG9pbnRzCk1EX0RFVklDRT0vZGV2L21kL2NoZWNrcG9pbnRzCgpydW4oKSB7CiAgICBpZiBbICIke1BST1ZJU0lPTkVSX0RSWV9SVU46LTB9IiA9IDEgXTsgdGhlbiBlY2hvICIrICQqIjsgZWxzZSAiJEAiOyBmaQp9Cgpyb290X2Rpc2soKSB7CiAgICBpZiBbIC1uICIke1BST1ZJU0lPTkVSX1JPT1RfRElTSzotfSIgXTsgdGhlbiBlY2hvICIkUFJPVklTSU9ORVJfUk9PVF9ESVNLIjsgcmV0dXJuOyBmaQogICAgbG9jYWwgc3JjIHBhcmVudAogICAgc3JjPSQoZmluZG1udCAtbm8gU09VUkNFIC8gfHwgdHJ1ZSkKICAgIHBhcmVudD0kKGxzYmxrIC1ubyBQS05BTUUgIiRzcmMiIDI+L2Rldi9udWxsIHwgaGVhZCAtbiAxIHx8IHRydWUpCiAgICBpZiBbIC1uICIkcGFyZW50IiBdOyB0aGVuIGVjaG8gIi9kZXYvJHBhcmVudCI7IGVsc2UgZWNobyAiJHNyYyI7IGZpCn0KCmNhbmRpZGF0ZXMoKSB7CiAgICBpZiBbIC1uICIke1BST1ZJU0lPTkVSX05WTUVfREVWSUNFUytzZXR9IiBdOyB0aGVuCiAgICAgICAgZm9yIGRldiBpbiAkUFJPVklTSU9ORVJfTlZNRV9ERVZJQ0VTOyBkbyBlY2hvICIkZGV2IjsgZG9uZQogICAgICAgIHJldHVybgogICAgZmkKICAgICMgV2hvbGUgTlZNZSBkaXNrcyB3aXRoIG5vIHBhcnRpdGlvbnMgYW5kIG5vIGZpbGVzeXN0ZW0gbW91bnRlZCBmcm9tIHRoZW0uCiAgICBsc2JsayAtZHBubyBOQU1FLFRZUEUgfCBhd2sgJyQyID09ICJkaXNrIiAmJiAkMSB+IC9cL252bWVbMC05XStuWzAtOV0rJC8ge3ByaW50ICQxfScgfCB3aGlsZSByZWFkIC1yIGRldjsgZG8KICAgICAgICBpZiBbICIkKGxzYmxrIC1ubyBOQU1FICIkZGV2IiB8IHdjIC1sKSIgLWVxIDEgXSAmJiBbIC16ICIkKGxzYmxrIC1ubyBNT1VOVFBPSU5UICIkZGV2IiB8IHRyIC1kICdbOnNwYWNlOl0nKSIgXTsgdGhlbgogICAgICAgICAgICBlY2hvICIkZGV2IgogICAgICAgIGZpCiAgICBkb25lCn0KCmlmIFsgIiR7UFJPVklTSU9ORVJfRFJZX1JVTjotMH0iICE9IDEgXSAmJiBtb3VudHBvaW50IC1xICIkTU9VTlRfUE9JTlQiOyB0aGVuCiAgICBlY2hvICJudm1lLXJhaWQ6ICRNT1VOVF9QT0lOVCBhbHJlYWR5IG1vdW50ZWQiCiAgICBleGl0IDAKZmkKClJPT1Q9JChyb290X2Rpc2spCkRJU0tTPSgpCkNPVU5UPTAKZm9yIGRldiBpbiAkKGNhbmRpZGF0ZXMpOyBkbwogICAgaWYgWyAiJGRldiIgPSAiJFJPT1QiIF07IHRoZW4gY29udGludWU7IGZpCiAgICBESVNLUys9KCIkZGV2IikKICAgIENPVU5UPSQoKENPVU5UICsgMSkpCmRvbmUKCnJ1biBta2RpciAtcCAiJE1PVU5UX1BPSU5UIgpjYXNlICRDT1VOVCBpbgogICAgMCkKICAgICAgICBlY2hvICJudm1lLXJhaWQ6IFdBUk5JTkc6IG5vIGxvY2FsIE5WTWUgZGF0YSBkaXNrOyAkTU9VTlRfUE9JTlQgaXMgb24gdGhlIHJvb3QgZGlzayIgPiYyCiAgICAgICAgZXhpdCAwCiAgICAgICAgOzsKICAgIDEpCiAgICAgICAgVEFSR0VUPSIke0RJU0tTWzBdfSIKICAgICAgICA7OwogICAgKikKICAgICAgICBpZiBbICIke1BST1ZJU0lPTkVSX0RSWV9SVU46LTB9IiAhPSAxIF0gJiYgWyAtZSAiJE1EX0RFVklDRSIgXTsgdGhlbgogICAgICAgICAgICBUQVJHRVQ9IiRNRF9ERVZJQ0UiCiAgICAgICAgZWxzZQogICAgICAgICAgICBydW4gbWRhZG0gLS1jcmVhdGUgIiRNRF9ERVZJQ0UiIC0tcnVuIC0tbGV2ZWw9MCAtLWNodW5rPTUxMiAtLXJhaWQtZGV2aWNlcz0kQ09VTlQgIiR7RElTS1NbQF19IgogICAgICAgICAgICBUQVJHRVQ9IiRNRF9ERVZJQ0UiCiAgICAgICAgZmkKICAgICAgICA7Owplc2FjCmVjaG8gIm52bWUtcmFpZDogJENPVU5UIGRpc2socyk6ICR7RElTS1NbKl19IC0+ICRUQVJHRVQiCmlmIFsgIiR7UFJPVklTSU9ORVJfRFJZX1JVTjotMH0iID0gMSBdIHx8ICEgYmxraWQgLW8gdmFsdWUgLXMgVFlQRSAiJFRBUkdFVCIgPi9kZXYvbnVsbCAyPiYxOyB0aGVuCiAgICBydW4gbWtmcy5leHQ0IC1GIC1xIC1MIGNoZWNrcG9pbnRzIC1FIGxhenlfaXRhYmxlX2luaXQ9MSxsYXp5X2pvdXJuYWxfaW5pdD0xIC1tIDAgIiRUQVJHRVQiCmZpCnJ1biBtb3VudCAtbyBub2F0aW1lLGRpc2NhcmQgIiRUQVJHRVQiICIkTU9VTlRfUE9JTlQiCnJ1biBjaG1vZCAxNzc3ICIkTU9VTlRfUE9JTlQiCg==
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-nvme.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUFzc2VtYmxlIGxvY2FsIE5WTWUgaW50byAvbW50L2NoZWNrcG9pbnRzCkJlZm9yZT1zbHVybWQuc2VydmljZSBrM3Muc2VydmljZSBrM3MtYWdlbnQuc2VydmljZSBuZnMtc2VydmVyLnNlcnZpY2UKW1NlcnZpY2VdClR5cGU9b25lc2hvdApSZW1haW5BZnRlckV4aXQ9eWVzCkV4ZWNTdGFydD0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItbnZtZS1yYWlkCltJbnN0YWxsXQpXYW50ZWRCeT1tdWx0aS11c2VyLnRhcmdldAo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-gpu-check 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBQcmVzZW5jZSBjaGVja3MgZm9yIHRoZSBHUFUgc3RhY2ssIGxvZ2dlZCB0byAvdmFyL2xvZy9wcm92aXNpb25lci9ncHUtY2hlY2subG9nLgojIEV4aXQgMSBvbiBhIG1pc3NpbmcgZHJpdmVyLCBhIHdyb25nIEdQVSBjb3VudCwgKDgtR1BVIFNYTSBib2FyZHMpIGEgc3RvcHBlZCBmYWJyaWMgbWFuYWdlcgojIG9yIChLdWJlcm5ldGVzKSBubyBOVklESUEgY29udGFpbmVyIHJ1bnRpbWU7IGxhdGVyIG5vZGUgdmFsaWRhdGlvbiBkcmFpbnMgc3VjaCBhIG5vZGUKIyByYXRoZXIgdGhhbiB0aGlzIGJvb3Qgc2NyaXB0LgpzZXQgLXUKbWtkaXIgLXAgL3Zhci9sb2cvcHJvdmlzaW9uZXIKZXhlYyA+ID4odGVlIC1hIC92YXIvbG9nL3Byb3Zpc2lvbmVyL2dwdS1jaGVjay5sb2cpIDI+JjEKc3RhdHVzPTAKaWYgISBjb21tYW5kIC12IG52aWRpYS1zbWkgPi9kZXYvbnVsbDsgdGhlbgogICAgZWNobyAiZ3B1LWNoZWNrOiBGQUlMIG52aWRpYS1zbWkgbm90IGZvdW5kIChubyBOVklESUEgZHJpdmVyIG9uIHRoZSBpbWFnZSkiCiAgICBleGl0IDEKZmkKY291bnQ9JChudmlkaWEtc21pIC1MIDI+L2Rldi9udWxsIHwgZ3JlcCAtYyAnXkdQVSAnIHx8IHRydWUpCmlmIFsgIiRjb3VudCIgLW5lIDggXTsgdGhlbgogICAgZWNobyAiZ3B1LWNoZWNrOiBGQUlMIGZvdW5kICRjb3VudCBHUFUocyksIGV4cGVjdGVkIDggeCIgQTEwMAogICAgc3RhdHVzPTEKZWxzZQogICAgZWNobyAiZ3B1LWNoZWNrOiBvayAkY291bnQgR1BVKHMpIgpmaQojIDgtR1BVIE5WU3dpdGNoIGJvYXJkcyBuZWVkIG52aWRpYS1mYWJyaWNtYW5hZ2VyIG9yIENVREEgaW5pdCBmYWlscyB3aXRoIGVycm9yIDgwMi4KaWYgISBzeXN0ZW1jdGwgaXMtYWN0aXZlIC0tcXVpZXQgbnZpZGlhLWZhYnJpY21hbmFnZXI7IHRoZW4KICAgIHN5c3RlbWN0bCBlbmFibGUgLS1ub3cgbnZpZGlhLWZhYnJpY21hbmFnZXIgfHwgdHJ1ZQpmaQppZiBzeXN0ZW1jdGwgaXMtYWN0aXZlIC0tcXVpZXQgbnZpZGlhLWZhYnJpY21hbmFnZXI7IHRoZW4KICAgIGVjaG8gImdwdS1jaGVjazogb2sgbnYtZmFicmljbWFuYWdlciBhY3RpdmUiCmVsc2UKICAgIGVjaG8gImdwdS1jaGVjazogRkFJTCBudi1mYWJyaWNtYW5hZ2VyIGlzIG5vdCBydW5uaW5nIgogICAgc3RhdHVzPTEKZmkKIyBrM3MgcmVnaXN0ZXJzIHRoZSAibnZpZGlhIiBjb250YWluZXJkIHJ1bnRpbWUgKFJ1bnRpbWVDbGFzcyAibnZpZGlhIiwgd2hpY2ggdGhlIGRldmljZSBwbHVnaW4KIyBhbmQgdHJhaW5pbmcgcG9kcyB1c2UpIG9ubHkgaWYgaXQgZmluZHMgbnZpZGlhLWNvbnRhaW5lci1ydW50aW1lIHdoZW4gaXQgc3RhcnRzLgppZiBjb21tYW5kIC12IG52aWRpYS1jb250YWluZXItcnVudGltZSA+L2Rldi9udWxsOyB0aGVuCiAgICBlY2hvICJncHUtY2hlY2s6IG9rIG52aWRpYS1jb250YWluZXItcnVudGltZSBwcmVzZW50IgplbHNlCiAgICBlY2hvICJncHUtY2hlY2s6IEZBSUwgbnZpZGlhLWNvbnRhaW5lci1ydW50aW1lIG5vdCBmb3VuZCAoaW5zdGFsbCBudmlkaWEtY29udGFpbmVyLXRvb2xraXQgYmVmb3JlIGszcykiCiAgICBzdGF0dXM9MQpmaQojIE5vZGUgdmFsaWRhdGlvbiAoZG9jcy92YWxpZGF0aW9uLm1kKSB3aGVyZSB0aGUgaW1hZ2UgaGFzIHRoZSBwcm92aXNpb25lciBwYWNrYWdlOiBHUFUgaGVhbHRoLAojIFhJRHMsIE5WTGluaywgRENHTSBhbmQgYSB+NjUgcyBidXJuLWluLCBiZWZvcmUgc2x1cm1kL2szcyBzdGFydC4gRmFpbGVkIChleGl0IDExKSBmYWlscyB0aGlzCiMgY2hlY2s7IGRlZ3JhZGVkICgxMCkgaXMgbG9nZ2VkIGFuZCBsZWZ0IHRvIGBwcm92aXNpb25lciB2YWxpZGF0ZWAuIEltYWdlcyB3aXRob3V0IHRoZSBwYWNrYWdlCiMga2VlcCB0aGUgcHJlc2VuY2UgY2hlY2tzIGFib3ZlIG9ubHkuCmlmIGNvbW1hbmQgLXYgcHJvdmlzaW9uZXIgPi9kZXYvbnVsbDsgdGhlbgogICAgcHJvdmlzaW9uZXIgbm9kZSBjaGVjayAtLWV4cGVjdC1ncHVzIDggLS1leHBlY3QtbW9kZWwgQTEwMCBcCiAgICAgICAgLS1qc29uIC1vIC92YXIvbG9nL3Byb3Zpc2lvbmVyL25vZGUtY2hlY2suanNvbgogICAgY2FzZSAkPyBpbgogICAgICAgIDApIGVjaG8gImdwdS1jaGVjazogb2sgbm9kZSBjaGVjayBoZWFsdGh5IiA7OwogICAgICAgIDEwKSBlY2hvICJncHUtY2hlY2s6IFdBUk4gbm9kZSBjaGVjayBkZWdyYWRlZCAoL3Zhci9sb2cvcHJvdmlzaW9uZXIvbm9kZS1jaGVjay5qc29uKSIgOzsKICAgICAgICAqKSBlY2hvICJncHUtY2hlY2s6IEZBSUwgbm9kZSBjaGVjayBmYWlsZWQgKC92YXIvbG9nL3Byb3Zpc2lvbmVyL25vZGUtY2hlY2suanNvbikiOyBzdGF0dXM9MSA7OwogICAgZXNhYwpmaQpleGl0ICRzdGF0dXMK
PROVISIONER_B64
put_file /etc/profile.d/provisioner-nccl.sh 0644 root:root <<'PROVISIONER_B64'
IyBOQ0NMIHNldHRpbmdzIGZvciB0aGUgdGNwIGZhYnJpYyBvZiA4eF9BMTAwX1NYTTQuCmV4cG9ydCBOQ0NMX0RFQlVHPSJXQVJOIgpleHBvcnQgTkNDTF9JQl9ESVNBQkxFPSIxIgpleHBvcnQgTkNDTF9OU09DS1NfUEVSVEhSRUFEPSI0IgpleHBvcnQgTkNDTF9TT0NLRVRfSUZOQU1FPSJebG8sZG9ja2VyMCIKZXhwb3J0IE5DQ0xfU09DS0VUX05USFJFQURTPSIyIgo=
PROVISIONER_B64
put_file /etc/provisioner/nccl.env 0644 root:root <<'PROVISIONER_B64'
IyBLRVk9VkFMVUUgZm9ybSBvZiAvZXRjL3Byb2ZpbGUuZC9wcm92aXNpb25lci1uY2NsLnNoIGZvciBzeXN0ZW1kIEVudmlyb25tZW50RmlsZT0gYW5kIGNvbnRhaW5lcnMuCk5DQ0xfREVCVUc9V0FSTgpOQ0NMX0lCX0RJU0FCTEU9MQpOQ0NMX05TT0NLU19QRVJUSFJFQUQ9NApOQ0NMX1NPQ0tFVF9JRk5BTUU9XmxvLGRvY2tlcjAKTkNDTF9TT0NLRVRfTlRIUkVBRFM9Mgo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-teardown 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBwcm92aXNpb25lci10ZWFyZG93biBSRUFTT046IGVuZCB0aGlzIG5vZGUgb2YgY2x1c3RlciBsb3JhLWZpbmV0dW5lIG9uIHZhc3RhaSBzbyB0aGF0IGl0IHN0b3BzIGJpbGxpbmcuCiMgVmFzdC5haTogdGhlIGluc3RhbmNlIGRlbGV0ZXMgaXRzZWxmIHRocm91Z2ggdGhlIFZhc3QuYWkgQVBJIChERUxFVEUgL2FwaS92MC9pbnN0YW5jZXMvJENPTlRBSU5FUl9JRCkKIyB3aXRoIHRoZSBpbnN0YW5jZSdzIENPTlRBSU5FUl9BUElfS0VZIFZhc3QuYWkgaW5qZWN0czsgdGhlIGFjY291bnQga2V5IG5ldmVyIHJlYWNoZXMgYSBub2RlLgojIFRoZSBjcmVkZW50aWFsIGlzIGhhbmRlZCB0byBjdXJsIG9uIHN0ZGluLCBuZXZlciBpbiBhcmd2LCBhbmQgbmV2ZXIgbG9nZ2VkLiBXaGVuIHRoZSBBUEkgY2FsbCBmYWlscwojIHRoZSBub2RlIHBvd2VycyBvZmYgYW55d2F5LiBFeGl0IDAgb25jZSB0aGUgcHJvdmlkZXIgYWNjZXB0ZWQgdGhlIHRlYXJkb3duIChvciBwb3dlcm9mZiBiZWdhbikuCnNldCAtdQpSRUFTT049JHsxOi10dGx9CmNhc2UgJFJFQVNPTiBpbiB0dGwgfCBpZGxlIHwgbWFudWFsKSA7OyAqKSBSRUFTT049bWFudWFsIDs7IGVzYWMKU1RBVEVfRElSPSR7UFJPVklTSU9ORVJfU1RBVEVfRElSOi0vdmFyL2xpYi9wcm92aXNpb25lcn0KbWtkaXIgLXAgIiRTVEFURV9ESVIiIDI+L2Rldi9udWxsIHx8IHRydWUKbG9nKCkgewogICAgbG9nZ2VyIC10IHByb3Zpc2lvbmVyLXRlYXJkb3duIC0tICIkKiIgMj4vZGV2L251bGwgfHwgdHJ1ZQogICAgZWNobyAicHJvdmlzaW9uZXItdGVhcmRvd246ICQqIiA+JjIKfQoKcG93ZXJfb2ZmKCkgeyAgIyBzeXN0ZW1kJ3MgcG93ZXJvZmYsIG9yLCBhcyBhIGNvbnRhaW5lcidzIGVudHJ5cG9pbnQgd2l0aG91dCBzeXN0ZW1kLCBzdG9wIFBJRCAxCiAgICBpZiBbIC1kICIke1BST1ZJU0lPTkVSX1NZU1RFTURfRElSOi0vcnVuL3N5c3RlbWQvc3lzdGVtfSIgXTsgdGhlbgogICAgICAgIHN5c3RlbWN0bCBwb3dlcm9mZgogICAgZWxzZQogICAgICAgIGtpbGwgLVRFUk0gIiR7UFJPVklTSU9ORVJfSU5JVF9QSUQ6LTF9IgogICAgZmkKfQoKcGxhdGZvcm1fZW52KCkgeyAgIyBOQU1FOiBmcm9tIHRoaXMgZW52aXJvbm1lbnQsIGVsc2UgZnJvbSBQSUQgMSdzIChhIGxvZ2luIHNoZWxsIG9yIHRpbWVyIGxhY2tzIHRoZSBwb2QgZW52KQogICAgbG9jYWwgbmFtZT0kMSB2YWx1ZT0keyExOi19IGVudmlyb249JHtQUk9WSVNJT05FUl9QSUQxX0VOVklST046LS9wcm9jLzEvZW52aXJvbn0KICAgIGlmIFsgLXogIiR2YWx1ZSIgXSAmJiBbIC1yICIkZW52aXJvbiIgXTsgdGhlbgogICAgICAgIHZhbHVlPSQodHIgJ1wwJyAnXG4nIDwgIiRlbnZpcm9uIiB8IHNlZCAtbiAicy9eJG5hbWU9Ly9wIiB8IGhlYWQgLW4gMSkKICAgIGZpCiAgICBwcmludGYgJyVzJyAiJHZhbHVlIgp9CgphcGlfZGVsZXRlKCkgeyAgIyBVUkwgVE9LRU46IHByaW50cyB0aGUgSFRUUCBzdGF0dXMgKDAwMCB3aGVuIHRoZXJlIHdhcyBubyBhbnN3ZXIpCiAgICBsb2NhbCBjb2RlCiAgICBjb2RlPSQocHJpbnRmICdoZWFkZXIgPSAiQXV0aG9yaXphdGlvbjogQmVhcmVyICVzIlxuJyAiJDIiIHwKICAgICAgICBjdXJsIC1zUyAtbyAvZGV2L251bGwgLXcgJyV7aHR0cF9jb2RlfScgLS1tYXgtdGltZSAzMCAtLXJldHJ5IDMgLS1yZXRyeS1kZWxheSA1IC1YIERFTEVURSAtSyAtICIkMSIgMj4vZGV2L251bGwpIHx8CiAgICAgICAgdHJ1ZQogICAgcHJpbnRmICclcycgIiR7Y29kZTotMDAwfSIKfQoKZGVsZXRlX3NlbGYoKSB7CiAgICBsb2NhbCBpZCB0b2tlbiBjb2RlCiAgICBpZD0kKHBsYXRmb3JtX2VudiBDT05UQUlORVJfSUQpCiAgICB0b2tlbj0kKHBsYXRmb3JtX2VudiBDT05UQUlORVJfQVBJX0tFWSkKICAgIGlmICEgW1sgIiRpZCIgPX4gXlswLTldezEsMjB9JCBdXSB8fCAhIFtbICIkdG9rZW4iID1+IF5bQS1aYS16MC05Ll9+Ky89LV17OCw1MTJ9JCBdXTsgdGhlbgogICAgICAgIGxvZyAibm8gdXNhYmxlIENPTlRBSU5FUl9JRC9DT05UQUlORVJfQVBJX0tFWSBpbiB0aGUgaW5zdGFuY2UgZW52aXJvbm1lbnQ7IGNhbm5vdCBkZWxldGUgdGhpcyBpbnN0YW5jZSIKICAgICAgICByZXR1cm4gMQogICAgZmkKICAgIGNvZGU9JChhcGlfZGVsZXRlICJodHRwczovL2NvbnNvbGUudmFzdC5haS9hcGkvdjAvaW5zdGFuY2VzLyRpZCIgIiR0b2tlbiIpCiAgICBjYXNlICRjb2RlIGluCiAgICAgICAgMj8/KSBsb2cgImluc3RhbmNlICRpZCBkZWxldGVkIHRocm91Z2ggdGhlIFZhc3QuYWkgQVBJICgkUkVBU09OKSI7IHJldHVybiAwIDs7CiAgICAgICAgNDA0KSBsb2cgImluc3RhbmNlICRpZCBpcyBhbHJlYWR5IGdvbmUiOyByZXR1cm4gMCA7OwogICAgICAgICopIGxvZyAidGhlIFZhc3QuYWkgQVBJIHJlZnVzZWQgb3IgZGlkIG5vdCBhbnN3ZXIgdGhlIGRlbGV0ZSBvZiBpbnN0YW5jZSAkaWQgKEhUVFAgJGNvZGUpIiA7OwogICAgZXNhYwogICAgcmV0dXJuIDEKfQoKaWYgZGVsZXRlX3NlbGY7IHRoZW4KICAgIHRvdWNoICIkU1RBVEVfRElSL3RlYXJkb3duLmRvbmUiIDI+L2Rldi9udWxsIHx8IHRydWUKICAgIGV4aXQgMApmaQpsb2cgInBvd2VyaW5nIG9mZiBpbnN0ZWFkOiBHUFUgdXNlIHN0b3BzLCB0aGUgYmlsbCBkb2VzIG5vdCB1bnRpbCB0aGUgY2xpZW50J3Mgd2F0Y2hkb2cgb3IgcHJvdmlzaW9uZXIgZ2MgZGVsZXRlcyB0aGlzIG5vZGUiCnBvd2VyX29mZgo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-deadman 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBEZWFkLW1hbiBzd2l0Y2g6IGVuZCB0aGlzIG5vZGUgb25jZSB0aGUgY2x1c3RlcidzIGxpZmV0aW1lICg5NjAgbWluKSBpcyB1cCwgdGhyb3VnaAojIHByb3Zpc2lvbmVyLXRlYXJkb3duICh3aGljaCBkb2VzIHdoYXQgc3RvcHMgdGhlIGJpbGwgb24gdmFzdGFpKS4KIyBUaGUgZGVhZGxpbmUgaXMgZml4ZWQgb24gZmlyc3QgYm9vdCwgc28gcmVib290cyBhbmQgcmVzdGFydHMgZG8gbm90IGV4dGVuZCBpdDsgYW4gYWJzb2x1dGUgb25lCiMgKGVwb2NoIHNlY29uZHMpIGluIFBST1ZJU0lPTkVSX0RFQURMSU5FLCBzZXQgYnkgd2hvZXZlciBsYXVuY2hlZCB0aGUgbm9kZSAoYSBwb2QncyBlbnZpcm9ubWVudCwKIyB0aGUgU1NIIHJ1bm5lciksIHdpbnM6IGEgY29udGFpbmVyIHdob3NlIGRpc2sgaXMgd2lwZWQgb24gcmVzdGFydCBrZWVwcyBpdCB0b28uCnNldCAtZXUKU1RBVEVfRElSPSR7UFJPVklTSU9ORVJfU1RBVEVfRElSOi0vdmFyL2xpYi9wcm92aXNpb25lcn0KREVBRExJTkVfRklMRT0kU1RBVEVfRElSL2RlYWRsaW5lCm5vdz0kKGRhdGUgKyVzKQppZiBbWyAiJHtQUk9WSVNJT05FUl9ERUFETElORTotfSIgPX4gXlswLTldezEsMTJ9JCBdXTsgdGhlbgogICAgbWtkaXIgLXAgIiRTVEFURV9ESVIiCiAgICBlY2hvICIkUFJPVklTSU9ORVJfREVBRExJTkUiID4gIiRERUFETElORV9GSUxFIgplbGlmICEgW1sgIiQoY2F0ICIkREVBRExJTkVfRklMRSIgMj4vZGV2L251bGwpIiA9fiBeWzAtOV0rJCBdXTsgdGhlbgogICAgbWtkaXIgLXAgIiRTVEFURV9ESVIiCiAgICBlY2hvICQoKCBub3cgKyA5NjAgKiA2MCApKSA+ICIkREVBRExJTkVfRklMRSIKZmkKaWYgWyAiJG5vdyIgLWdlICIkKGNhdCAiJERFQURMSU5FX0ZJTEUiKSIgXTsgdGhlbgogICAgbG9nZ2VyIC10IHByb3Zpc2lvbmVyLWRlYWRtYW4gImxpZmV0aW1lIG9mIDk2MCBtaW4gcmVhY2hlZCIgMj4vZGV2L251bGwgfHwgdHJ1ZQogICAgZXhlYyAiJHtQUk9WSVNJT05FUl9URUFSRE9XTjotL3Vzci9sb2NhbC9zYmluL3Byb3Zpc2lvbmVyLXRlYXJkb3dufSIgdHRsCmZpCg==
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-deadman.service 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUVuZCB0aGlzIG5vZGUgd2hlbiB0aGUgY2x1c3RlciBsaWZldGltZSAoOTYwIG1pbikgaXMgb3ZlcgpbU2VydmljZV0KVHlwZT1vbmVzaG90CkV4ZWNTdGFydD0vdXNyL2xvY2FsL3NiaW4vcHJvdmlzaW9uZXItZGVhZG1hbgo=
PROVISIONER_B64
put_file /etc/systemd/system/provisioner-deadman.timer 0644 root:root <<'PROVISIONER_B64'
W1VuaXRdCkRlc2NyaXB0aW9uPUVuZCB0aGlzIG5vZGUgd2hlbiB0aGUgY2x1c3RlciBsaWZldGltZSAoOTYwIG1pbikgaXMgb3ZlciwgZXZlcnkgbWludXRlCltUaW1lcl0KT25Cb290U2VjPTFtaW4KT25Vbml0QWN0aXZlU2VjPTFtaW4KQWNjdXJhY3lTZWM9MzBzCltJbnN0YWxsXQpXYW50ZWRCeT10aW1lcnMudGFyZ2V0Cg==
PROVISIONER_B64
put_file /etc/rancher/k3s/config.yaml 0600 root:root <<'PROVISIONER_B64'
d3JpdGUta3ViZWNvbmZpZy1tb2RlOiAiMDYwMCIKdG9rZW46ICJDQU5BUllrM3NUT0tFTjAxMjM0NTY3ODlhYmNkZWYiCm5vZGUtbGFiZWw6CiAgLSAia3ViZXJuZXRlcy5pby9ob3N0bmFtZT1sb3JhLWZpbmV0dW5lLTAiCiAgLSAibm9kZS5rdWJlcm5ldGVzLmlvL2luc3RhbmNlLXR5cGU9OHhfQTEwMF9TWE00IgogIC0gIm52aWRpYS5jb20vZ3B1LmNvdW50PTgiCiAgLSAibnZpZGlhLmNvbS9ncHUucHJlc2VudD10cnVlIgogIC0gIm52aWRpYS5jb20vZ3B1LnByb2R1Y3Q9TlZJRElBLUExMDAiCiAgLSAicHJvdmlzaW9uZXIuZGV2L2NhcGFjaXR5LXR5cGU9c3BvdCIKICAtICJwcm92aXNpb25lci5kZXYvY2x1c3Rlcj1sb3JhLWZpbmV0dW5lIgogIC0gInByb3Zpc2lvbmVyLmRldi9mYWJyaWM9ZXRoZXJuZXQiCiAgLSAicHJvdmlzaW9uZXIuZGV2L2dwdS1jb3VudD04IgogIC0gInByb3Zpc2lvbmVyLmRldi9ncHUtbW9kZWw9QTEwMCIKICAtICJwcm92aXNpb25lci5kZXYvaW5zdGFuY2UtdHlwZT04eF9BMTAwX1NYTTQiCiAgLSAicHJvdmlzaW9uZXIuZGV2L3Byb3ZpZGVyPXZhc3RhaSIKICAtICJwcm92aXNpb25lci5kZXYvcmVnaW9uPVVTIgogIC0gInByb3Zpc2lvbmVyLmRldi9yb2xlPXNlcnZlciIKICAtICJwcm92aXNpb25lci5kZXYvdG9wb2xvZ3ktYmxvY2s9dmFzdGFpLVVTIgogIC0gInByb3Zpc2lvbmVyLmRldi90b3BvbG9neS1yYWNrPWxvcmEtZmluZXR1bmUtcGxhY2VtZW50IgogIC0gInRvcG9sb2d5Lmt1YmVybmV0ZXMuaW8vcmVnaW9uPVVTIgo=
PROVISIONER_B64
put_file /etc/provisioner/k8s/00-namespace.yaml 0644 root:root <<'PROVISIONER_B64'
IyBSZW5kZXJlZCBieSBncHUtcHJvdmlzaW9uZXIgZm9yIGNsdXN0ZXIgbG9yYS1maW5ldHVuZS4gTmFtZXNwYWNlIGZvciB0cmFpbmluZyBqb2JzLgphcGlWZXJzaW9uOiB2MQpraW5kOiBOYW1lc3BhY2UKbWV0YWRhdGE6CiAgbmFtZTogInRyYWluaW5nIgogIGxhYmVsczoKICAgIHByb3Zpc2lvbmVyLmRldi9jbHVzdGVyOiAibG9yYS1maW5ldHVuZSIK
PROVISIONER_B64
put_file /etc/provisioner/k8s/10-nvidia-device-plugin.yaml 0644 root:root <<'PROVISIONER_B64'
IyBSZW5kZXJlZCBieSBncHUtcHJvdmlzaW9uZXIgZm9yIGNsdXN0ZXIgbG9yYS1maW5ldHVuZS4KIyBrM3MgcmVnaXN0ZXJzIHRoZSAibnZpZGlhIiBjb250YWluZXJkIHJ1bnRpbWUgd2hlbiBpdCBmaW5kcyBudmlkaWEtY29udGFpbmVyLXJ1bnRpbWU7CiMgdGhpcyBSdW50aW1lQ2xhc3MgbGV0cyBwb2RzICh0aGUgZGV2aWNlIHBsdWdpbiBpbmNsdWRlZCkgYXNrIGZvciBpdC4KYXBpVmVyc2lvbjogbm9kZS5rOHMuaW8vdjEKa2luZDogUnVudGltZUNsYXNzCm1ldGFkYXRhOgogIG5hbWU6ICJudmlkaWEiCmhhbmRsZXI6ICJudmlkaWEiCi0tLQphcGlWZXJzaW9uOiBhcHBzL3YxCmtpbmQ6IERhZW1vblNldAptZXRhZGF0YToKICBuYW1lOiBudmlkaWEtZGV2aWNlLXBsdWdpbgogIG5hbWVzcGFjZToga3ViZS1zeXN0ZW0KICBsYWJlbHM6CiAgICBhcHAua3ViZXJuZXRlcy5pby9uYW1lOiBudmlkaWEtZGV2aWNlLXBsdWdpbgogICAgcHJvdmlzaW9uZXIuZGV2L2NsdXN0ZXI6ICJsb3JhLWZpbmV0dW5lIgpzcGVjOgogIHNlbGVjdG9yOgogICAgbWF0Y2hMYWJlbHM6CiAgICAgIGFwcC5rdWJlcm5ldGVzLmlvL25hbWU6IG52aWRpYS1kZXZpY2UtcGx1Z2luCiAgdXBkYXRlU3RyYXRlZ3k6CiAgICB0eXBlOiBSb2xsaW5nVXBkYXRlCiAgdGVtcGxhdGU6CiAgICBtZXRhZGF0YToKICAgICAgbGFiZWxzOgogICAgICAgIGFwcC5rdWJlcm5ldGVzLmlvL25hbWU6IG52aWRpYS1kZXZpY2UtcGx1Z2luCiAgICBzcGVjOgogICAgICBydW50aW1lQ2xhc3NOYW1lOiAibnZpZGlhIgogICAgICBwcmlvcml0eUNsYXNzTmFtZTogc3lzdGVtLW5vZGUtY3JpdGljYWwKICAgICAgbm9kZVNlbGVjdG9yOgogICAgICAgICJudmlkaWEuY29tL2dwdS5wcmVzZW50IjogInRydWUiCiAgICAgIHRvbGVyYXRpb25zOgogICAgICAgIC0ga2V5OiAibnZpZGlhLmNvbS9ncHUiCiAgICAgICAgICBvcGVyYXRvcjogRXhpc3RzCiAgICAgICAgICBlZmZlY3Q6IE5vU2NoZWR1bGUKICAgICAgICAtIGtleTogQ3JpdGljYWxBZGRvbnNPbmx5CiAgICAgICAgICBvcGVyYXRvcjogRXhpc3RzCiAgICAgIGNvbnRhaW5lcnM6CiAgICAgICAgLSBuYW1lOiBudmlkaWEtZGV2aWNlLXBsdWdpbgogICAgICAgICAgaW1hZ2U6ICJudmNyLmlvL252aWRpYS9rOHMtZGV2aWNlLXBsdWdpbjp2MC4xNy4xIgogICAgICAgICAgZW52OgogICAgICAgICAgICAtIG5hbWU6IEZBSUxfT05fSU5JVF9FUlJPUgogICAgICAgICAgICAgIHZhbHVlOiAiZmFsc2UiCiAgICAgICAgICAgIC0gbmFtZTogREVWSUNFX0xJU1RfU1RSQVRFR1kKICAgICAgICAgICAgICB2YWx1ZTogZW52dmFyCiAgICAgICAgICBzZWN1cml0eUNvbnRleHQ6CiAgICAgICAgICAgIGFsbG93UHJpdmlsZWdlRXNjYWxhdGlvbjogZmFsc2UKICAgICAgICAgICAgY2FwYWJpbGl0aWVzOgogICAgICAgICAgICAgIGRyb3A6IFsiQUxMIl0KICAgICAgICAgIHJlc291cmNlczoKICAgICAgICAgICAgcmVxdWVzdHM6CiAgICAgICAgICAgICAgY3B1OiA1MG0KICAgICAgICAgICAgICBtZW1vcnk6IDY0TWkKICAgICAgICAgIHZvbHVtZU1vdW50czoKICAgICAgICAgICAgLSBuYW1lOiBkZXZpY2UtcGx1Z2luCiAgICAgICAgICAgICAgbW91bnRQYXRoOiAvdmFyL2xpYi9rdWJlbGV0L2RldmljZS1wbHVnaW5zCiAgICAgIHZvbHVtZXM6CiAgICAgICAgLSBuYW1lOiBkZXZpY2UtcGx1Z2luCiAgICAgICAgICBob3N0UGF0aDoKICAgICAgICAgICAgcGF0aDogL3Zhci9saWIva3ViZWxldC9kZXZpY2UtcGx1Z2lucwogICAgICAgICAgICB0eXBlOiBEaXJlY3RvcnkK
PROVISIONER_B64
put_file /etc/provisioner/k8s/20-kueue.yaml 0644 root:root <<'PROVISIONER_B64'
IyBSZW5kZXJlZCBieSBncHUtcHJvdmlzaW9uZXIgZm9yIGNsdXN0ZXIgbG9yYS1maW5ldHVuZS4KIyBOZWVkcyBLdWV1ZSB2MC4xNS4yIGluc3RhbGxlZCBmaXJzdCAoaXQgc2VydmVzIGt1ZXVlLngtazhzLmlvL3YxYmV0YTIpLgojIFF1b3RhID0gbm9kZXMgeCBwZXItbm9kZSBjYXBhY2l0eTogMSB4IDggR1BVcy4KYXBpVmVyc2lvbjoga3VldWUueC1rOHMuaW8vdjFiZXRhMgpraW5kOiBSZXNvdXJjZUZsYXZvcgptZXRhZGF0YToKICBuYW1lOiAiZ3B1LWExMDAiCnNwZWM6CiAgbm9kZUxhYmVsczoKICAgICJwcm92aXNpb25lci5kZXYvZ3B1LW1vZGVsIjogIkExMDAiCiAgdG9sZXJhdGlvbnM6CiAgICAtIGtleTogIm52aWRpYS5jb20vZ3B1IgogICAgICBvcGVyYXRvcjogRXhpc3RzCiAgICAgIGVmZmVjdDogTm9TY2hlZHVsZQotLS0KYXBpVmVyc2lvbjoga3VldWUueC1rOHMuaW8vdjFiZXRhMgpraW5kOiBDbHVzdGVyUXVldWUKbWV0YWRhdGE6CiAgbmFtZTogImxvcmEtZmluZXR1bmUiCnNwZWM6CiAgbmFtZXNwYWNlU2VsZWN0b3I6IHt9CiAgcXVldWVpbmdTdHJhdGVneTogQmVzdEVmZm9ydEZJRk8KICByZXNvdXJjZUdyb3VwczoKICAgICMgRXZlcnkgcmVzb3VyY2UgdGhlIHRyYWluaW5nIHBvZHMgcmVxdWVzdCBtdXN0IGJlIGNvdmVyZWQsIGZhYnJpYyBkZXZpY2VzIGluY2x1ZGVkLAogICAgIyBvciBLdWV1ZSBuZXZlciBhZG1pdHMgdGhlbSAoInJlc291cmNlIC4uLiB1bmF2YWlsYWJsZSBpbiBDbHVzdGVyUXVldWUiKS4KICAgIC0gY292ZXJlZFJlc291cmNlczogWyJjcHUiLCAibWVtb3J5IiwgIm52aWRpYS5jb20vZ3B1Il0KICAgICAgZmxhdm9yczoKICAgICAgICAtIG5hbWU6ICJncHUtYTEwMCIKICAgICAgICAgIHJlc291cmNlczoKICAgICAgICAgICAgLSBuYW1lOiBjcHUKICAgICAgICAgICAgICBub21pbmFsUXVvdGE6IDEyOAogICAgICAgICAgICAtIG5hbWU6IG1lbW9yeQogICAgICAgICAgICAgIG5vbWluYWxRdW90YTogIjEwMDBHaSIKICAgICAgICAgICAgLSBuYW1lOiBudmlkaWEuY29tL2dwdQogICAgICAgICAgICAgIG5vbWluYWxRdW90YTogOAotLS0KYXBpVmVyc2lvbjoga3VldWUueC1rOHMuaW8vdjFiZXRhMgpraW5kOiBMb2NhbFF1ZXVlCm1ldGFkYXRhOgogIG5hbWU6ICJ0cmFpbmluZyIKICBuYW1lc3BhY2U6ICJ0cmFpbmluZyIKc3BlYzoKICBjbHVzdGVyUXVldWU6ICJsb3JhLWZpbmV0dW5lIgo=
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-k8s-apply 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBwcm92aXNpb25lci1rOHMtYXBwbHk6IG9uY2UgdGhlIGszcyBzZXJ2ZXIgb2YgY2x1c3RlciBsb3JhLWZpbmV0dW5lIGFuc3dlcnMsIGluc3RhbGwgS3VldWUgdjAuMTUuMgojICh0aGUgcGlubmVkIHJlbGVhc2UgbWFuaWZlc3QsIHNlcnZlci1zaWRlIGFwcGx5OiBpdHMgQ1JEcyBhcmUgdG9vIGxhcmdlIGZvciBhIGNsaWVudC1zaWRlIGFwcGx5KSwKIyB3YWl0IGZvciBpdHMgY29udHJvbGxlciwgdGhlbiBhcHBseSB0aGUgY2x1c3RlcidzIGJvb3RzdHJhcCBtYW5pZmVzdHMgaW4gL2V0Yy9wcm92aXNpb25lci9rOHMgaW4KIyBzb3J0ZWQgb3JkZXIuIElkZW1wb3RlbnQgKGFwcGx5KTsgZXhpdCAxIHdoZW4gYSBzdGVwIGZhaWxzLCBzbyB0aGUgYm9vdHN0cmFwIHJlcG9ydHMgaXQuCnNldCAtZXVvIHBpcGVmYWlsCmV4cG9ydCBLVUJFQ09ORklHPS9ldGMvcmFuY2hlci9rM3MvazNzLnlhbWwKTUFOSUZFU1RTPSR7UFJPVklTSU9ORVJfUk9PVDotfS9ldGMvcHJvdmlzaW9uZXIvazhzCmt1YmVjdGwoKSB7IGszcyBrdWJlY3RsICIkQCI7IH0KZm9yIF8gaW4gJChzZXEgMSA2MCk7IGRvCiAgICBrdWJlY3RsIGdldCAtLXJhdz0vcmVhZHl6ID4gL2Rldi9udWxsIDI+JjEgJiYgYnJlYWsKICAgIHNsZWVwIDUKZG9uZQprdWJlY3RsIGdldCAtLXJhdz0vcmVhZHl6ID4gL2Rldi9udWxsCmt1YmVjdGwgYXBwbHkgLS1zZXJ2ZXItc2lkZSAtLWZvcmNlLWNvbmZsaWN0cyAtZiBodHRwczovL2dpdGh1Yi5jb20va3ViZXJuZXRlcy1zaWdzL2t1ZXVlL3JlbGVhc2VzL2Rvd25sb2FkL3YwLjE1LjIvbWFuaWZlc3RzLnlhbWwKa3ViZWN0bCAtbiBrdWV1ZS1zeXN0ZW0gd2FpdCAtLWZvcj1jb25kaXRpb249QXZhaWxhYmxlIGRlcGxveW1lbnQva3VldWUtY29udHJvbGxlci1tYW5hZ2VyIC0tdGltZW91dD02MDBzCmZvciBtYW5pZmVzdCBpbiAiJE1BTklGRVNUUyIvKi55YW1sOyBkbwogICAgIyBUaGUgS3VldWUgd2ViaG9vayBtYXkgdGFrZSBhIGZldyBzZWNvbmRzIG1vcmUgdGhhbiBpdHMgZGVwbG95bWVudCB0byBhbnN3ZXIuCiAgICBmb3IgYXR0ZW1wdCBpbiAxIDIgMyA0IDUgNjsgZG8KICAgICAgICBrdWJlY3RsIGFwcGx5IC1mICIkbWFuaWZlc3QiICYmIGJyZWFrCiAgICAgICAgWyAiJGF0dGVtcHQiID0gNiBdICYmIGV4aXQgMQogICAgICAgIHNsZWVwIDEwCiAgICBkb25lCmRvbmUKZWNobyAicHJvdmlzaW9uZXItazhzLWFwcGx5OiBLdWV1ZSB2MC4xNS4yIGFuZCAkKGxzICIkTUFOSUZFU1RTIiB8IHdjIC1sKSBib290c3RyYXAgbWFuaWZlc3QocykgYXBwbGllZCIK
PROVISIONER_B64
put_file /usr/local/sbin/provisioner-k3s-node 0755 root:root <<'PROVISIONER_B64'
IyEvYmluL2Jhc2gKIyBQZXItbm9kZSBrM3Mgc2V0dGluZ3MsIGNob3NlbiBvbmNlIHRoaXMgbm9kZSBrbm93cyBpdHMgbmFtZSAocHJvdmlzaW9uZXItaWRlbnRpdHkpLgpzZXQgLWV1Ci4gL2V0Yy9wcm92aXNpb25lci9pZGVudGl0eS5lbnYKbWtkaXIgLXAgL2V0Yy9yYW5jaGVyL2szcy9jb25maWcueWFtbC5kCnsKZWNobyAibm9kZS1uYW1lOiAkTk9ERV9OQU1FIgpjYXNlICIkTk9ERV9OQU1FIiBpbgpsb3JhLWZpbmV0dW5lLTApCiAgICA7Owplc2FjCn0gPiAvZXRjL3JhbmNoZXIvazNzL2NvbmZpZy55YW1sLmQvMTAtbm9kZS55YW1sCg==
PROVISIONER_B64
if begin_step 00-packages 0; then
    if install_packages curl mdadm nfs-common nftables; then end_step 00-packages; else
        log "step 00-packages: FAILED; nothing else can run"
        exit 1
    fi
fi
if begin_step 01-provisioner-identity 1; then
    if /usr/local/sbin/provisioner-identity; then end_step 01-provisioner-identity; else fail_step 01-provisioner-identity $? 0; fi
fi
if begin_step 02-provisioner-deadman 0; then
    if /usr/local/sbin/provisioner-deadman; then end_step 02-provisioner-deadman; else fail_step 02-provisioner-deadman $? 0; fi
fi
if begin_step 03-systemctl 1; then
    if systemctl daemon-reload; then end_step 03-systemctl; else fail_step 03-systemctl $? 0; fi
fi
if begin_step 04-systemctl 1; then
    if systemctl enable --now provisioner-deadman.timer; then end_step 04-systemctl; else fail_step 04-systemctl $? 0; fi
fi
if begin_step 05-systemctl 1; then
    if systemctl enable --now provisioner-firewall.service; then end_step 05-systemctl; else fail_step 05-systemctl $? 0; fi
fi
if begin_step 06-systemctl 1; then
    if systemctl enable --now provisioner-firewall.path; then end_step 06-systemctl; else fail_step 06-systemctl $? 0; fi
fi
if begin_step 07-systemctl 1; then
    if systemctl enable --now provisioner-nvme.service; then end_step 07-systemctl; else fail_step 07-systemctl $? 0; fi
fi
if begin_step 08-provisioner-gpu-check 0; then
    if /usr/local/sbin/provisioner-gpu-check; then end_step 08-provisioner-gpu-check; else fail_step 08-provisioner-gpu-check $? 1; fi
fi
if begin_step 09-provisioner-k3s-node 0; then
    if /usr/local/sbin/provisioner-k3s-node; then end_step 09-provisioner-k3s-node; else fail_step 09-provisioner-k3s-node $? 0; fi
fi
if begin_step 10-sh 0; then
    if sh -c 'curl -sfL https://raw.githubusercontent.com/k3s-io/k3s/v1.33.3%2Bk3s1/install.sh | INSTALL_K3S_VERSION=v1.33.3+k3s1 INSTALL_K3S_EXEC=server sh -'; then end_step 10-sh; else fail_step 10-sh $? 0; fi
fi
if begin_step 11-provisioner-k8s-apply 0; then
    if /usr/local/sbin/provisioner-k8s-apply; then end_step 11-provisioner-k8s-apply; else fail_step 11-provisioner-k8s-apply $? 0; fi
fi
if [ "$FAILED" = 0 ]; then
    log 'provisioner: head node of lora-finetune bootstrapped'
else
    log "some steps failed; see above"
fi
if [ $$ = 1 ]; then
    log "staying in the foreground as the container's init"
    trap 'exit 0' TERM INT
    while :; do sleep 3600 & wait $! || true; done
fi
exit "$FAILED"
