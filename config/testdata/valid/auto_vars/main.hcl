variable "model" {
  type = string
}

variable "limits" {
  type = object({ memory = string, cpus = number })
  default = {
    memory = "1g"
    cpus   = 1
  }
}

sandbox "s" {
  image  = "python:3.12-slim"
  memory = var.limits.memory
  cpus   = var.limits.cpus
}

harness "h" {
  command = ["agent", "--model", var.model]
  sandbox = sandbox.s
}
