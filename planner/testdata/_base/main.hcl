variable "model" {
  type    = string
  default = "gpt-5-mini"
}

sandbox "local" {
  kind = "local"
}

sandbox "box" {
  image   = "python:3.12-slim"
  network = "none"
  memory  = "2g"
  cpus    = 1
  pids    = 256
  mounts  = ["./harness:/harness"]
}

harness "oracle" {
  builtin = "oracle"
  sandbox = sandbox.local
}

harness "agent" {
  command = ["python3", "/harness/agent.py"]
  sandbox = sandbox.box
  env     = ["OPENAI_API_KEY"]
  args    = { model = var.model, max_turns = 30 }
}

dataset "tiny" {
  source = "./tasks"
}

judge "quality" {
  source    = "./judges/quality"
  base_url  = "https://api.openai.com/v1"
  key_env   = "OPENAI_API_KEY"
  model     = "gpt-5"
  max_calls = 2
}
