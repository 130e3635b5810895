sandbox "nomad" {
  kind  = "nomad"
  image = "python:3.12-slim"
}
