judge "q" {
  source   = "./judges/q"
  base_url = "https://api.anthropic.com"
  provider = "gemini"
  api      = "responses"
}
