sandbox "x" {
  kind = "docker"
}
