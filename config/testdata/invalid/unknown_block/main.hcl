sandbox "x" {
  kind = "docker"
}

sandbx "y" {
  kind = "docker"
}
