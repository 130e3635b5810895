harness "nop" {
  builtin = "nop"
}

dataset "d" {
  source = "../../tasks"
}

eval "e" {
  dataset   = dataset.d
  harnesses = [harness.nop]
  require   = ["network_block", "network_blok", "gpu"]
}
