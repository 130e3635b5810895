sandbox "s" {
  network = "host"
}

sandbox "l" {
  kind    = "local"
  network = "none"
}

verifier "v" {
  network = "closed"
}
