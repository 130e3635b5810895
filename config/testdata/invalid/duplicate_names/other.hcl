sandbox "x" {
  kind = "local"
}

variable "v" {
  default = 1
}

variable "v" {
  default = 2
}

locals {
  l = 1
}

locals {
  l = 2
}
