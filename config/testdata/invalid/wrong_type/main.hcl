sandbox "s" {
  read_only = "yes please"
}

harness "agent" {
  builtin = "nop"
  env     = "OPENAI_API_KEY"
}
