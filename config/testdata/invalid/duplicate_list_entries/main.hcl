harness "nop" {
  builtin = "nop"
}

harness "oracle" {
  builtin = "oracle"
}

dataset "d" {
  source = "../../tasks"
}

judge "quality" {
  source    = "../../valid/full/judges/quality"
  base_url  = "https://models.example.com/v1"
  key_env   = "OPENAI_API_KEY"
  max_calls = 4
}

eval "e" {
  dataset   = dataset.d
  harnesses = [harness.nop, harness.oracle, harness.nop]
  judges    = [judge.quality, judge.quality]
}
