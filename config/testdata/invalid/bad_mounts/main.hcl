sandbox "s" {
  mounts = [
    "./harness",
    "./harness:relative",
    "./missing:/missing",
    "./harness:/harness:rx",
  ]
}
