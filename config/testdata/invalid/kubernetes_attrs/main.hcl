sandbox "k" {
  kind             = "kubernetes"
  image            = "busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000"
  pids             = 64
  mounts           = ["./x:/x"]
  namespace        = "Not_A_Namespace"
  registry         = "https://registry.example.com"
  runtime_class_vm = true
  kubeconfig       = "./missing-kubeconfig"
  node_selector    = { "bad key!" = "v" }
  tolerations      = [{ key = "k", operator = "Sometimes" }]
}
