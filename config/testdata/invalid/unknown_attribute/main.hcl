sandbox "hardened" {
  memroy = "4g"
}
