harness "empty" {
  env = []
}

harness "both" {
  command = ["/harness/agent"]
  builtin = "oracle"
}
