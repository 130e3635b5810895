harness "nop" {
  builtin = "nop"
}

dataset "d" {
  source = "../../tasks"
}

eval "e" {
  dataset   = harness.nop
  harnesses = [dataset.d, "nop"]
  judges    = harness.nop
}

harness "other" {
  builtin = "nop"
  sandbox = "docker"
}
