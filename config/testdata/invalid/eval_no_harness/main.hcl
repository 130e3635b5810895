dataset "d" {
  source = "../../tasks"
}

eval "e" {
  dataset   = dataset.d
  harnesses = []
}
