sandbox "has space" {}

harness "h" {
  builtin = "nop"

  mcp "m" {
    command = []
  }

  mcp "m" {
    command = ["x"]
  }

  mcp "n" {
    env = []
  }
}
