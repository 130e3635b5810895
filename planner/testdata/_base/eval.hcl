eval "baseline" {
  dataset   = dataset.tiny
  harnesses = [harness.oracle, harness.agent]
  attempts  = 2
  judges    = [judge.quality]
}
