#!/bin/sh
# Builds what examples/mcp needs, from nothing: the image
# hemra-example-mcp-agent:latest (FROM scratch, Debian's static busybox,
# the example agent as a static Go binary) and ./bin/files-server, the
# example MCP server, for this host. No registry is needed.
#
#   ./build.sh                 # or BUSYBOX=/path/to/static/busybox ./build.sh
#                              # BIN_DIR=DIR puts files-server in DIR instead of ./bin
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
busybox=${BUSYBOX:-/bin/busybox}
tag=${TAG:-hemra-example-mcp-agent:latest}
bin=${BIN_DIR:-$here/bin}

case "$(ldd "$busybox" 2>&1 || true)" in
  *"not a dynamic executable"* | *"statically linked"* | *"ldd: not found"* | *"command not found"*) ;;
  *) echo "build.sh: $busybox is not a static binary; install busybox-static or set BUSYBOX" >&2; exit 1 ;;
esac

mkdir -p "$bin"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$bin/files-server" ./examples/mcp/files-server)
echo "built bin/files-server"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$busybox" "$ctx/busybox"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/mcp-agent" ./examples/mcp/agent)
cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN mkdir -p /tmp /app /logs/agent /logs/verifier /logs/artifacts && chmod 1777 /tmp
COPY mcp-agent /usr/local/bin/mcp-agent
ENV PATH=/usr/local/bin:/bin
WORKDIR /app
DOCKERFILE
DOCKER_BUILDKIT=0 docker build --quiet --tag "$tag" "$ctx" >/dev/null
echo "built $tag"
