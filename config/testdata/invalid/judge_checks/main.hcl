judge "nofile" {
  source    = "./judges/none"
  base_url  = "http://models.example.com/v1"
  key_env   = "OPENAI-KEY"
  max_calls = 0
}
