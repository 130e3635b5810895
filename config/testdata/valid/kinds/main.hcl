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

sandbox "cluster" {
  kind             = "kubernetes"
  context          = "evals"
  namespace        = "hemra-evals"
  registry         = "registry.example.com/evals/"
  image            = "python:3.12-slim"
  memory           = "2g"
  cpus             = 1
  read_only        = true
  runtime_class    = "kata"
  runtime_class_vm = true
  service_account  = "evals-agent"
  node_selector    = { "pool" = "evals", "kubernetes.io/arch" = "amd64" }
  tolerations      = [{ key = "dedicated", operator = "Equal", value = "evals", effect = "NoSchedule" }, { operator = "Exists" }]
  probe_image      = "busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000"
}
