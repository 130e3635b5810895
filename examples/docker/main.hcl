# The Docker quickstart: a program harness in a hardened container, the
# quickstart's tasks, and a model-graded judge. Build the harness image
# first (see README.md), then:
#
#   hemra validate
#   hemra plan
#   hemra apply

variable "model" {
  type        = string
  default     = "gpt-5-mini"
  description = "Model the example harness and the judge call."
}

# Every isolation setting spelled out, at hemra's defaults or tighter.
sandbox "hardened" {
  kind      = "docker"
  image     = "hemra-example-harness:latest" # pinned to a digest by `hemra init`
  network   = "none"                         # the harness reaches no host
  memory    = "1g"
  cpus      = 1
  pids      = 256
  read_only = true
  mounts    = ["./harness:/harness"] # read-only
}

harness "example" {
  command = ["/harness/agent"]
  sandbox = sandbox.hardened
  args    = { model = var.model, max_turns = 10 }
  timeout = "5m"
}

harness "oracle" {
  builtin = "oracle"
  sandbox = sandbox.hardened
}

dataset "quickstart" {
  source = "../quickstart/tasks"
}

verifier "isolated" {
  network = "none"
  timeout = "2m"
}

# The judge reaches its model only through hemra's gateway, which adds the
# key named by key_env; the key never enters a container or the store.
judge "quality" {
  source    = "./judges/quality"
  base_url  = "https://api.openai.com/v1"
  key_env   = "OPENAI_API_KEY"
  model     = var.model
  max_calls = 2
}

eval "hardened" {
  dataset   = dataset.quickstart
  harnesses = [harness.oracle, harness.example]
  attempts  = 1
  verifier  = verifier.isolated
  judges    = [judge.quality]
  require   = ["network_block", "resource_limit"]
}
