harness "o" {
  builtin = "orcale"
}
