sandbox "s" {
  kind = "docker
}
