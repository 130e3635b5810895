#!/usr/bin/env bash
# k8s-up.sh: bring up a private single-node Kubernetes on this machine for
# hemra's Kubernetes tests. Idempotent: a cluster already up and healthy is
# left as it is.
#
#   scripts/k8s-up.sh            build what is missing, start, wait for Ready
#   scripts/k8s-up.sh --build    only build/fetch the cached binaries
#
# What it uses, all cached under $HEMRA_K8S_CACHE (default ~/.cache/hemra-k8s):
#   - Kubernetes $K8S_VERSION (kube-apiserver, kubelet, kube-scheduler,
#     kube-controller-manager) built from the Go module proxy's source of
#     k8s.io/kubernetes (the cold build is ~12 CPU-minutes; cached after);
#   - Debian's etcd-server, containerd, runc and containernetworking-plugins,
#     fetched with `apt-get download` and unpacked with `dpkg-deb -x`, so no
#     system service is installed or started;
#   - a pause image compiled from Kubernetes' own pause.c (gcc -static).
#
# The cluster runs in $HEMRA_K8S_DIR (default /tmp/hemra-k8s): its own etcd,
# its own containerd instance (own root, state, socket: Docker's containerd is
# untouched), a bridge CNI network of its own, non-default ports, all on
# 127.0.0.1. The admin kubeconfig is $HEMRA_K8S_DIR/admin.kubeconfig.
# Every process is recorded by pid; host changes (sysctls the kubelet
# rewrites, an iptables rule, fixed host paths the kubelet creates) are
# recorded and undone by scripts/k8s-down.sh.
set -euo pipefail

K8S_VERSION="${HEMRA_K8S_VERSION:-v1.34.4}"
CACHE="${HEMRA_K8S_CACHE:-$HOME/.cache/hemra-k8s}"
RUN="${HEMRA_K8S_DIR:-/tmp/hemra-k8s}"
BRIDGE=hemrak8s0
POD_CIDR=10.234.0.0/16
SVC_CIDR=10.235.0.0/24
SVC_IP=10.235.0.1
P_API=16443 P_ETCD=12379 P_ETCD_PEER=12380 P_KUBELET=20250 P_KUBELET_HEALTH=20248
P_SCHED=20259 P_CM=20257 P_STREAM=20010
# Host sysctls the kubelet sets when it starts (saved, restored by k8s-down.sh).
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
# Fixed host paths the kubelet and CNI use whatever their configuration.
HOST_PATHS="/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni"

BIN="$CACHE/k8s-$K8S_VERSION/bin"
DEBS="$CACHE/debs/root"
PAUSE_TAR="$CACHE/pause/pause.tar"
PAUSE_IMAGE=hemra.local/pause:3.10.1

log() { echo "k8s-up: $*" >&2; }
die() {
	echo "k8s-up: error: $*" >&2
	mkdir -p "$RUN" && echo "$*" >"$RUN/up.failed"
	exit 1
}
# Tests waiting for the cluster (HEMRA_TEST_K8S_WAIT) stop waiting when
# up.failed appears beside the kubeconfig.
mkdir -p "$RUN"
rm -f "$RUN/up.failed"
trap 'rc=$?; if [ "$rc" -ne 0 ] && [ ! -f "$RUN/up.failed" ]; then echo "k8s-up.sh exited $rc" >"$RUN/up.failed"; fi' EXIT

# ---------------------------------------------------------------- build ----

build_kubernetes() {
	local b
	for b in kube-apiserver kubelet kube-scheduler kube-controller-manager; do
		[ -x "$BIN/$b" ] || break
		b=""
	done
	[ -z "${b:-}" ] && return 0
	log "building Kubernetes $K8S_VERSION (cold: ~12 CPU-minutes; cached in $BIN)"
	local src work minor
	src=$(GOFLAGS= go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$src" ] || die "go mod download k8s.io/kubernetes@$K8S_VERSION gave no source folder"
	work="$CACHE/k8s-$K8S_VERSION/src"
	rm -rf "$work"
	mkdir -p "$work"
	cp -r "$src/." "$work/"
	chmod -R u+w "$work"
	# The module zip has neither staging/ nor a usable go.work: point every
	# staging replace at the published module of the same release.
	rm -rf "$work/go.work" "$work/go.work.sum" "$work/vendor"
	local pub="v0.${K8S_VERSION#v1.}"
	sed -i -E "s#^([[:space:]]*)(k8s\.io/[A-Za-z0-9._-]+) => \./staging/src/k8s\.io/[A-Za-z0-9._-]+#\1\2 => \2 $pub#" "$work/go.mod"
	grep -q '=> ./staging' "$work/go.mod" && die "go.mod still has staging replaces"
	minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
	local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
	mkdir -p "$BIN.tmp"
	(cd "$work" && GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$BIN.tmp/" \
		./cmd/kube-apiserver ./cmd/kubelet ./cmd/kube-scheduler ./cmd/kube-controller-manager) \
		|| die "building Kubernetes failed"
	rm -rf "$BIN"
	mv "$BIN.tmp" "$BIN"
	rm -rf "$work"
}

fetch_debs() {
	if [ -x "$DEBS/usr/bin/etcd" ] && [ -x "$DEBS/usr/bin/containerd" ] && [ -x "$DEBS/usr/sbin/runc" ] && [ -x "$DEBS/usr/lib/cni/bridge" ]; then
		return 0
	fi
	log "fetching etcd-server, containerd, runc, containernetworking-plugins (apt-get download; nothing installed)"
	local d="$CACHE/debs"
	rm -rf "$d"
	mkdir -p "$d/pkgs" "$d/root.tmp"
	chmod 777 "$d/pkgs" # apt's _apt sandbox user writes the downloads
	local pkgs="etcd-server containerd runc containernetworking-plugins"
	if ! (cd "$d/pkgs" && apt-get download -qq $pkgs) >/dev/null 2>&1; then
		apt-get update -qq
		(cd "$d/pkgs" && apt-get download -qq $pkgs) || die "apt-get download $pkgs failed"
	fi
	local f
	for f in "$d"/pkgs/*.deb; do dpkg-deb -x "$f" "$d/root.tmp"; done
	ls "$d"/pkgs/ >"$d/root.tmp/VERSIONS"
	rm -rf "$d/pkgs"
	mv "$d/root.tmp" "$DEBS"
}

build_pause() {
	[ -s "$PAUSE_TAR" ] && return 0
	log "building the pause image from Kubernetes' pause.c"
	local src d
	src=$(GOFLAGS= go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	d=$(mktemp -d)
	mkdir -p "$d/rootfs"
	gcc -Os -static -DVERSION=3.10.1-hemra -o "$d/rootfs/pause" "$src/build/pause/linux/pause.c" || die "gcc -static pause.c failed (needs libc6-dev)"
	strip "$d/rootfs/pause" 2>/dev/null || true
	# An image archive in `docker save` form, which ctr imports.
	tar --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$d/rootfs" -cf "$d/layer.tar" pause
	local lsha csha
	lsha=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
	mkdir -p "$d/img/$lsha"
	mv "$d/layer.tar" "$d/img/$lsha/layer.tar"
	printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"hemra k8s-up.sh: pause.c"}]}' "$lsha" >"$d/config.json"
	csha=$(sha256sum "$d/config.json" | cut -d' ' -f1)
	mv "$d/config.json" "$d/img/$csha.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$csha" "$PAUSE_IMAGE" "$lsha" >"$d/img/manifest.json"
	mkdir -p "$(dirname "$PAUSE_TAR")"
	tar -C "$d/img" -cf "$PAUSE_TAR.tmp" .
	mv "$PAUSE_TAR.tmp" "$PAUSE_TAR"
	rm -rf "$d"
}

build_all() {
	command -v go >/dev/null || die "go is not on PATH"
	command -v gcc >/dev/null || die "gcc is not on PATH (apt-get install gcc libc6-dev)"
	command -v openssl >/dev/null || die "openssl is not on PATH"
	mkdir -p "$CACHE"
	fetch_debs
	build_pause
	build_kubernetes
}

# ---------------------------------------------------------------- start ----

KUBECONFIG_ADMIN="$RUN/admin.kubeconfig"

alive() { # alive NAME: the recorded process is running
	local f="$RUN/pids/$1"
	[ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

start() { # start NAME CMD...: run in the background, record its pid
	local name=$1
	shift
	if alive "$name"; then return 0; fi
	"$@" >"$RUN/logs/$name.log" 2>&1 &
	echo $! >"$RUN/pids/$name"
}

api() { # api PATH: GET from the API server as admin
	curl -fsS --max-time 5 --cacert "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key" "https://127.0.0.1:$P_API$1"
}

wait_for() { # wait_for WHAT SECONDS CMD...
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 4; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.25
	done
	log "$what did not come up in ${secs}s; last lines of the logs under $RUN/logs:"
	tail -n 5 "$RUN"/logs/*.log >&2 || true
	die "$what did not come up"
}

cert() { # cert NAME CN O [SAN]: a key and a certificate signed by the local CA
	local name=$1 cn=$2 o=$3 san=${4:-}
	local p="$RUN/pki"
	[ -s "$p/$name.crt" ] && return 0
	openssl genrsa -out "$p/$name.key" 2048 2>/dev/null
	local subj="/CN=$cn"
	[ -n "$o" ] && subj="/O=$o/CN=$cn"
	openssl req -new -key "$p/$name.key" -subj "$subj" -out "$p/$name.csr" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=serverAuth,clientAuth"
		[ -n "$san" ] && echo "subjectAltName=$san"
	} >"$p/$name.ext"
	openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
		-days 3650 -sha256 -extfile "$p/$name.ext" -out "$p/$name.crt" 2>/dev/null
	rm -f "$p/$name.csr" "$p/$name.ext"
}

kubeconfig() { # kubeconfig FILE CERTNAME
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: hemra-k8s
  cluster:
    server: https://127.0.0.1:$P_API
    certificate-authority: $RUN/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $RUN/pki/$2.crt
    client-key: $RUN/pki/$2.key
contexts:
- name: hemra-k8s
  context: {cluster: hemra-k8s, user: $2}
current-context: hemra-k8s
EOF
}

make_pki() {
	local p="$RUN/pki"
	mkdir -p "$p"
	if [ ! -s "$p/ca.crt" ]; then
		openssl genrsa -out "$p/ca.key" 2048 2>/dev/null
		openssl req -x509 -new -key "$p/ca.key" -subj "/CN=hemra-k8s-ca" -days 3650 -sha256 -out "$p/ca.crt" 2>/dev/null
	fi
	cert apiserver kube-apiserver "" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$SVC_IP"
	cert admin hemra-k8s-admin system:masters
	cert apiserver-kubelet kube-apiserver-kubelet-client system:masters
	cert kubelet system:node:localhost system:nodes "DNS:localhost,IP:127.0.0.1"
	if [ ! -s "$p/sa.key" ]; then
		openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
		openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
	fi
	kubeconfig "$KUBECONFIG_ADMIN" admin
	kubeconfig "$RUN/kubelet.kubeconfig" kubelet
}

record_host_state() {
	# Recorded once per bring-up, before anything changes the host.
	[ -f "$RUN/host/recorded" ] && return 0
	mkdir -p "$RUN/host"
	local s p
	for s in $SYSCTLS; do
		echo "$s=$(sysctl -n "$s")" >>"$RUN/host/sysctls"
	done
	for p in $HOST_PATHS; do
		[ -e "$p" ] || echo "$p" >>"$RUN/host/created-paths"
	done
	# The kubelet adds iptables chains of its own (KUBE-FIREWALL, the canaries).
	local t
	for t in iptables ip6tables; do
		command -v "$t-save" >/dev/null || continue
		"$t-save" 2>/dev/null | awk -v t="$t" '/^\*/ {tb=substr($0, 2)} /^:KUBE-/ {print t, tb, substr($1, 2)}' >>"$RUN/host/iptables-chains-before"
	done
	touch "$RUN/host/iptables-chains-before"
	touch "$RUN/host/created-paths" "$RUN/host/recorded"
}

host_network() {
	# Docker sets the FORWARD policy to DROP and bridged frames go through
	# iptables (br_netfilter): let traffic between pods on our own bridge pass.
	if command -v iptables >/dev/null && ! iptables -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -m comment --comment hemra-k8s -j ACCEPT 2>/dev/null; then
		iptables -I FORWARD 1 -i "$BRIDGE" -o "$BRIDGE" -m comment --comment hemra-k8s -j ACCEPT
		touch "$RUN/host/iptables-rule"
	fi
}

cgroups() {
	# The kubelet's cgroupRoot in every v1 hierarchy (cpuset needs its
	# cpus/mems copied before tasks can join).
	local h
	for h in /sys/fs/cgroup/*/; do
		h=${h%/}
		[ "$(basename "$h")" = unified ] && continue
		[ -d "$h" ] || continue
		mountpoint -q "$h" || continue
		mkdir -p "$h/hemra-k8s"
		if [ -f "$h/cpuset.cpus" ]; then
			cat "$h/cpuset.cpus" >"$h/hemra-k8s/cpuset.cpus"
			cat "$h/cpuset.mems" >"$h/hemra-k8s/cpuset.mems"
		fi
	done
}

write_configs() {
	mkdir -p "$RUN/cni/net.d" "$RUN/containerd" "$RUN/kubelet" "$RUN/pod-logs"
	cat >"$RUN/cni/net.d/10-hemra.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "hemra-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$RUN/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
	cat >"$RUN/containerd/config.toml" <<EOF
version = 2
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
plugin_dir = ""
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$RUN/containerd/containerd.sock"
[ttrpc]
  address = "$RUN/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$RUN/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "$P_STREAM"
  disable_apparmor = true
  enable_selinux = false
  max_concurrent_downloads = 8
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$DEBS/usr/sbin/runc"
        Root = "$RUN/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$DEBS/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
EOF
	cat >"$RUN/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $P_KUBELET
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $P_KUBELET_HEALTH
containerRuntimeEndpoint: unix://$RUN/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $RUN/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $RUN/pki/kubelet.crt
tlsPrivateKeyFile: $RUN/pki/kubelet.key
cgroupDriver: cgroupfs
cgroupRoot: /hemra-k8s
failCgroupV1: false
failSwapOn: false
podLogsDir: $RUN/pod-logs
maxPods: 300
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 87600h
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
evictionPressureTransitionPeriod: 5s
kubeAPIQPS: 200
kubeAPIBurst: 400
registryPullQPS: 0
syncFrequency: 10s
fileCheckFrequency: 20s
nodeStatusReportFrequency: 1m
resolvConf: /etc/resolv.conf
EOF
}

wait_pid_gone() { # a stale pid file of a process that died
	local name=$1
	[ -f "$RUN/pids/$name" ] && ! alive "$name" && rm -f "$RUN/pids/$name"
	return 0
}

node_ready() {
	api /api/v1/nodes/localhost | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}

default_sa() {
	api /api/v1/namespaces/default/serviceaccounts/default
}

start_cluster() {
	mkdir -p "$RUN/pids" "$RUN/logs"
	if alive kube-apiserver && alive kubelet && node_ready 2>/dev/null; then
		log "already up ($KUBECONFIG_ADMIN)"
		return 0
	fi
	local n
	for n in etcd containerd kube-apiserver kubelet kube-scheduler kube-controller-manager; do wait_pid_gone "$n"; done
	record_host_state
	make_pki
	write_configs
	cgroups
	host_network

	start etcd "$DEBS/usr/bin/etcd" --name hemra-k8s --data-dir "$RUN/etcd" \
		--listen-client-urls "http://127.0.0.1:$P_ETCD" --advertise-client-urls "http://127.0.0.1:$P_ETCD" \
		--listen-peer-urls "http://127.0.0.1:$P_ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$P_ETCD_PEER" \
		--initial-cluster "hemra-k8s=http://127.0.0.1:$P_ETCD_PEER" --listen-metrics-urls "" \
		--quota-backend-bytes 2147483648 --log-level warn
	# containerd finds its shim (containerd-shim-runc-v2) on PATH: put the
	# unpacked package's first, so Docker's containerd is never involved.
	start containerd env PATH="$DEBS/usr/bin:$DEBS/usr/sbin:$PATH" "$DEBS/usr/bin/containerd" --config "$RUN/containerd/config.toml"
	wait_for etcd 30 curl -fsS --max-time 2 "http://127.0.0.1:$P_ETCD/health"
	start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$P_ETCD" \
		--bind-address 127.0.0.1 --secure-port "$P_API" --advertise-address 127.0.0.1 \
		--service-cluster-ip-range "$SVC_CIDR" --endpoint-reconciler-type none \
		--tls-cert-file "$RUN/pki/apiserver.crt" --tls-private-key-file "$RUN/pki/apiserver.key" \
		--client-ca-file "$RUN/pki/ca.crt" \
		--kubelet-client-certificate "$RUN/pki/apiserver-kubelet.crt" --kubelet-client-key "$RUN/pki/apiserver-kubelet.key" \
		--kubelet-certificate-authority "$RUN/pki/ca.crt" --kubelet-preferred-address-types Hostname \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$RUN/pki/sa.pub" \
		--service-account-signing-key-file "$RUN/pki/sa.key" \
		--authorization-mode Node,RBAC --allow-privileged=false \
		--max-requests-inflight 800 --max-mutating-requests-inflight 400
	wait_for containerd 30 test -S "$RUN/containerd/containerd.sock"
	"$DEBS/usr/bin/ctr" --address "$RUN/containerd/containerd.sock" -n k8s.io images import "$PAUSE_TAR" >/dev/null \
		|| die "importing the pause image into containerd failed"
	wait_for kube-apiserver 60 api /readyz
	start kubelet "$BIN/kubelet" --config "$RUN/kubelet/config.yaml" --kubeconfig "$RUN/kubelet.kubeconfig" \
		--root-dir "$RUN/kubelet/root" --hostname-override localhost --v 1
	start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$KUBECONFIG_ADMIN" \
		--authentication-kubeconfig "$KUBECONFIG_ADMIN" --authorization-kubeconfig "$KUBECONFIG_ADMIN" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port "$P_SCHED" \
		--kube-api-qps 200 --kube-api-burst 400
	start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$KUBECONFIG_ADMIN" \
		--authentication-kubeconfig "$KUBECONFIG_ADMIN" --authorization-kubeconfig "$KUBECONFIG_ADMIN" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port "$P_CM" \
		--service-account-private-key-file "$RUN/pki/sa.key" --root-ca-file "$RUN/pki/ca.crt" \
		--use-service-account-credentials=false --controllers '*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle' \
		--kube-api-qps 200 --kube-api-burst 400
	wait_for "the node" 90 node_ready
	wait_for "the default service account" 60 default_sa
	log "up: export KUBECONFIG=$KUBECONFIG_ADMIN"
}

case "${1:-}" in
--build) build_all ;;
"") build_all && start_cluster ;;
*) die "usage: k8s-up.sh [--build]" ;;
esac
