harness "nop" {
  builtin = "nop"
}

eval "e" {
  harnesses = [harness.nop]
}

eval "f" {
  dataset = dataset.missing
}

judge "j" {
  model = "gpt-5-mini"
}
