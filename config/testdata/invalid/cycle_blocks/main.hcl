harness "a" {
  builtin = "nop"
  args    = { peer = harness.b.name }
}

harness "b" {
  builtin = "nop"
  args    = { peer = harness.a.name }
}
