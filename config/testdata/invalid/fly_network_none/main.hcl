sandbox "fly" {
  kind    = "fly"
  app     = "hemra-sandboxes"
  network = "none"
}

sandbox "fly2" {
  kind = "fly"
}
