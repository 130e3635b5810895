harness "agent" {
  builtin = "nop"
  timeout = "15 minutes"
}

verifier "v" {
  timeout = "600"
}
