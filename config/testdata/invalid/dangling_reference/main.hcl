sandbox "hardened" {
  network = "none"
}

harness "agent" {
  command = ["/harness/agent"]
  sandbox = sandbox.hardend
  args    = { model = var.modle }
  env     = local.keys
}
