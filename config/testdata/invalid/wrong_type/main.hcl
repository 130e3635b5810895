sandbox "s" {
  read_only = "yes please"
}

harness "agent" {
  command = ["/harness/agent"]
  env     = "OPENAI_API_KEY"
}
