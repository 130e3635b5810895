#!/usr/bin/env bash
# k8s-down.sh: stop the cluster scripts/k8s-up.sh started and undo what it
# changed on the host. Idempotent: nothing up, nothing done.
#
# Every process is stopped by the pid k8s-up.sh recorded (never by name);
# the pod containers are killed through the cluster's own containerd; the
# mounts under the cluster folder are unmounted, the bridge and the cgroups
# removed, the kubelet's host sysctls restored, the iptables rule removed
# and the fixed host paths the kubelet created deleted.
#
#   scripts/k8s-down.sh           stop; keep $HEMRA_K8S_DIR (logs, certificates)
#   scripts/k8s-down.sh --purge   stop and remove $HEMRA_K8S_DIR
set -uo pipefail

CACHE="${HEMRA_K8S_CACHE:-$HOME/.cache/hemra-k8s}"
RUN="${HEMRA_K8S_DIR:-/tmp/hemra-k8s}"
BRIDGE=hemrak8s0
DEBS="$CACHE/debs/root"
CTR=("$DEBS/usr/bin/ctr" --address "$RUN/containerd/containerd.sock" -n k8s.io)

log() { echo "k8s-down: $*" >&2; }

[ -d "$RUN" ] || exit 0

stop() { # stop NAME [SECONDS]: SIGTERM the recorded pid, SIGKILL after SECONDS
	local f="$RUN/pids/$1" secs=${2:-10} pid i
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		for ((i = 0; i < secs * 10; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -f "$f"
}

alive() { [ -f "$RUN/pids/$1" ] && kill -0 "$(cat "$RUN/pids/$1")" 2>/dev/null; }

# Nothing may start new pods while the rest stops.
stop kube-controller-manager
stop kube-scheduler
stop kubelet 20

# The pod containers and sandboxes, through our own containerd: their shims
# outlive containerd, so they are stopped first.
if alive containerd && [ -x "${CTR[0]}" ]; then
	for t in $("${CTR[@]}" tasks ls -q 2>/dev/null); do
		"${CTR[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1
	done
	for i in $(seq 1 50); do
		[ -z "$("${CTR[@]}" tasks ls -q 2>/dev/null | head -1)" ] && break
		for t in $("${CTR[@]}" tasks ls -q 2>/dev/null); do "${CTR[@]}" tasks delete -f "$t" >/dev/null 2>&1; done
		sleep 0.1
	done
	for c in $("${CTR[@]}" containers ls -q 2>/dev/null); do
		"${CTR[@]}" containers delete "$c" >/dev/null 2>&1
	done
fi
# A shim left anyway is found by the socket address it serves, which names
# this cluster's containerd.
for p in /proc/[0-9]*; do
	cmd=$({ tr "\0" " " <"$p/cmdline"; } 2>/dev/null) || continue
	case $cmd in
	*containerd-shim*"-address $RUN/containerd/containerd.sock"*) kill -KILL "${p#/proc/}" 2>/dev/null ;;
	esac
done
stop containerd 20
stop kube-apiserver 20
stop etcd 20

# Mounts under the cluster folder (pod volumes, network namespaces, rootfs
# overlays, shm), deepest first.
for i in 1 2 3; do
	mps=$(awk -v run="$RUN/" 'index($5, run) == 1 {print $5}' /proc/self/mountinfo | sort -r)
	[ -z "$mps" ] && break
	for m in $mps; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done

if ip link show "$BRIDGE" >/dev/null 2>&1; then
	ip link delete "$BRIDGE" 2>/dev/null || log "could not remove bridge $BRIDGE"
fi

# The kubelet's cgroup root in every v1 hierarchy, deepest folders first.
for h in /sys/fs/cgroup/*/hemra-k8s; do
	[ -d "$h" ] || continue
	find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null
	[ -d "$h" ] && log "cgroup $h still has processes; left in place"
done

if [ -f "$RUN/host/iptables-rule" ]; then
	iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -m comment --comment hemra-k8s -j ACCEPT 2>/dev/null
	rm -f "$RUN/host/iptables-rule"
fi

# The kubelet's own iptables chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY,
# KUBE-IPTABLES-HINT) that were not there before k8s-up.sh: the rules that
# jump to them first, then the chains.
if [ -f "$RUN/host/iptables-chains-before" ]; then
	for t in iptables ip6tables; do
		command -v "$t-save" >/dev/null || continue
		"$t-save" 2>/dev/null | awk -v t="$t" '/^\*/ {tb=substr($0, 2)} /^:KUBE-/ {print t, tb, substr($1, 2)}' |
			while read -r cmd table chain; do
				grep -qxF "$cmd $table $chain" "$RUN/host/iptables-chains-before" && continue
				"$cmd-save" -t "$table" 2>/dev/null | grep -E "^-A [A-Z0-9_-]+ .*-j $chain( |\$)" | sed 's/^-A /-D /' |
					while read -r rule; do eval "$cmd -t $table $rule" 2>/dev/null; done
				"$cmd" -t "$table" -F "$chain" 2>/dev/null
				"$cmd" -t "$table" -X "$chain" 2>/dev/null || log "could not remove $cmd $table chain $chain"
			done
	done
fi

if [ -f "$RUN/host/sysctls" ]; then
	while IFS= read -r kv; do
		[ -n "$kv" ] && sysctl -q -w "$kv" >/dev/null 2>&1 || log "could not restore $kv"
	done <"$RUN/host/sysctls"
fi

if [ -f "$RUN/host/created-paths" ]; then
	while IFS= read -r p; do
		[ -n "$p" ] || continue
		# Only what is still ours: the kubelet's and CNI's own files.
		mps=$(awk -v p="$p/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r)
		for m in $mps; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
		rm -rf "$p"
	done <"$RUN/host/created-paths"
fi
rm -rf "$RUN/host"

if [ "${1:-}" = "--purge" ]; then
	rm -rf "$RUN"
fi
log "down"
