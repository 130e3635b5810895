variable "attempts" {
  type    = number
  default = 0

  validation {
    condition     = var.attempts >= 1
    error_message = "attempts must be at least 1."
  }
}

variable "name" {
  type    = string
  default = [1, 2]
}

variable "bad_type" {
  type = strin
}
