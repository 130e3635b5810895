harness "agent" {
  command = ["/harness/agent"]
  timeout = "15 minutes"
}

verifier "v" {
  timeout = "600"
}
