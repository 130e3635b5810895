# MCP servers: the agent runs in a container with no network, and reads
# files through an MCP tool of a server that hemra runs on this host, one
# per attempt, reached only through a Unix socket. Build the agent's image
# and the server first (see README.md), then:
#
#   FILES_ROOT=$PWD/files hemra init
#   FILES_ROOT=$PWD/files hemra apply
#   hemra show mcp/mcp-agent/answer#1     # the tool call and its result

sandbox "offline" {
  image   = "hemra-example-mcp-agent:latest" # built by ./build.sh, pinned by `hemra init`
  network = "none"
  memory  = "512m"
  cpus    = 1
  pids    = 128
}

# examples/mcp/agent: an MCP client of the official Go SDK that calls the
# tool its task names through /hemra/bin/mcp-connect and answers with it.
harness "mcp-agent" {
  command = ["/usr/local/bin/mcp-agent"]
  sandbox = sandbox.offline
  timeout = "2m"

  # examples/mcp/files-server, built into ./bin by ./build.sh. It runs on
  # this host with PATH and FILES_ROOT only: list only servers you would
  # run yourself.
  mcp "files" {
    command = ["./bin/files-server"]
    env     = ["FILES_ROOT"]
  }
}

dataset "questions" {
  source = "./tasks.jsonl"
}

eval "mcp" {
  dataset   = dataset.questions
  harnesses = [harness.mcp-agent]
  require   = ["network_block"]
}
