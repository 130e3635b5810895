variable "n" {
  type    = number
  default = 1
}
