harness "nop" {
  builtin = "nop"
}

dataset "d" {
  source = "../../tasks"
}

eval "import" {
  dataset   = dataset.d
  harnesses = [harness.nop]
}
