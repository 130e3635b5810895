# The Docker quickstart: a program harness in a hardened container on the
# quickstart's tasks, each verified in its own container on a snapshot of
# the agent's. Build the harness image first (see README.md), then:
#
#   hemra init      # pins hemra-example-harness:latest in hemra.lock.hcl
#   hemra plan
#   hemra apply

variable "model" {
  type        = string
  default     = "gpt-5-mini"
  description = "Model a real harness would call (the example harness calls none)."
}

# Every isolation setting spelled out, at hemra's defaults or tighter.
sandbox "hardened" {
  kind      = "docker"
  image     = "hemra-example-harness:latest" # built by ./build-image.sh, pinned by `hemra init`
  network   = "none"                         # the harness reaches no host
  memory    = "1g"
  cpus      = 1
  pids      = 256
  read_only = true # a tmpfs /tmp; the work and log folders stay writable
}

# examples/harness-go, baked into the image by ./build-image.sh. It writes
# the file its args name, so it solves hello-world and fails the others:
# a task failure is a result (reward 0), not an error.
harness "example" {
  command = ["/usr/local/bin/harness-go"]
  sandbox = sandbox.hardened
  args    = { file = "hello.txt", content = "Hello, world!\n", model = var.model }
  timeout = "5m"
}

dataset "quickstart" {
  source = "../quickstart/tasks"
}

# The verifier runs each task's tests/test.sh in a separate container
# started from a snapshot of the agent's: no network, same hardening.
verifier "isolated" {
  network = "none"
  timeout = "2m"
}

# A model-graded judge, for when a key and the network are at hand: add
# `judges = [judge.quality]` to the eval and set OPENAI_API_KEY. The judge
# reaches its model only through hemra's gateway, which adds the key; the
# key never enters a container or the store.
judge "quality" {
  source    = "./judges/quality"
  base_url  = "https://api.openai.com/v1"
  key_env   = "OPENAI_API_KEY"
  model     = var.model
  max_calls = 2
}

eval "hardened" {
  dataset   = dataset.quickstart
  harnesses = [harness.example]
  attempts  = 1
  verifier  = verifier.isolated
  require   = ["network_block", "resource_limit"]
}
