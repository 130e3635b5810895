harness "nop" {
  builtin = "nop"
}

dataset "d" {
  source = "../../tasks"
}

eval "e" {
  dataset   = dataset.d
  harnesses = [harness.nop]
  attempts  = 0
}

eval "f" {
  dataset   = dataset.d
  harnesses = [harness.nop]
  attempts  = 1.5
}
