hemra {
  required_version = ">= 9.0.0"
}

hemra {
}
