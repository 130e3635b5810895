sandbox "local" {
  kind   = "local"
  image  = "python:3.12-slim"
  memory = "1g"
}

sandbox "sprite" {
  kind  = "sprites"
  image = "ubuntu:24.04"
}
