variable "model" {
  type        = string
  description = "Model the agent calls."
}
