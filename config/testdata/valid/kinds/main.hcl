sandbox "default" {}

sandbox "local" {
  kind    = "local"
  network = "open"
}

sandbox "modal" {
  kind    = "modal"
  image   = "python:3.12-slim"
  network = "none"
  memory  = 2147483648
  cpus    = 0.5
}

sandbox "fly" {
  kind    = "fly"
  app     = "hemra-sandboxes"
  network = "open"
  memory  = "1g"
}

sandbox "sprites" {
  kind   = "sprites"
  egress = ["github.com", "*.pypi.org"]
}

sandbox "loose" {
  memory = "0"
  cpus   = 0
  pids   = 0
}
