harness "agent" {
  builtin = "nop"
  env     = ["OPENAI_API_KEY", "DOCKER_HOST"]

  mcp "files" {
    command = ["mcp-files"]
    env     = ["FLY_API_TOKEN"]
  }
}

harness "agent2" {
  builtin = "nop"
  env     = ["HEMRA_STORE"]
}

harness "agent3" {
  builtin = "nop"
  env     = ["OPENAI_API_KEY=sk-123", "1BAD"]
}

verifier "v" {
  env = ["SPRITES_TOKEN", "MODAL_TOKEN_SECRET"]
}
