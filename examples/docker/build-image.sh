#!/bin/sh
# Builds hemra-example-harness:latest from nothing: FROM scratch, Debian's
# static busybox (apt-get install busybox-static) for a shell and the
# usual tools, and the example harness (examples/harness-go) built as a
# static Go binary. No registry is needed.
#
#   ./build-image.sh                 # or BUSYBOX=/path/to/static/busybox ./build-image.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
busybox=${BUSYBOX:-/bin/busybox}
tag=${TAG:-hemra-example-harness:latest}

case "$(ldd "$busybox" 2>&1 || true)" in
  *"not a dynamic executable"* | *"statically linked"* | *"ldd: not found"* | *"command not found"*) ;;
  *) echo "build-image.sh: $busybox is not a static binary; install busybox-static or set BUSYBOX" >&2; exit 1 ;;
esac

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$busybox" "$ctx/busybox"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/harness-go" ./examples/harness-go)

cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN mkdir -p /tmp /app /logs/agent /logs/verifier /logs/artifacts && chmod 1777 /tmp
COPY harness-go /usr/local/bin/harness-go
ENV PATH=/usr/local/bin:/bin
WORKDIR /app
DOCKERFILE

DOCKER_BUILDKIT=0 docker build --quiet --tag "$tag" "$ctx"
echo "built $tag"
