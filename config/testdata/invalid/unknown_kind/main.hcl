sandbox "k8s" {
  kind  = "kubernetes"
  image = "python:3.12-slim"
}
