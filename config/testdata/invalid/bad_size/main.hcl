sandbox "s" {
  memory = "4q"
}

sandbox "t" {
  memory = "-1g"
}
