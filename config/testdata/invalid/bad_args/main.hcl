harness "h" {
  builtin = "nop"
  args    = ["a", "b"]
}

sandbox "s" {
  kind = "docker"
  user = ""
}
