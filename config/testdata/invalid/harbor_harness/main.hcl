sandbox "s" {}

harness "h" {
  via     = "harbor"
  sandbox = sandbox.s
}

harness "p" {
  builtin = "nop"
  model   = "gpt-5"
}

harness "v" {
  via   = "harbour"
  agent = "claude-code"
}
