sandbox "bare" {
  network = "none"
}

sandbox "sprite" {
  kind = "sprites"
}

harness "a" {
  command = ["/harness/agent"]
  sandbox = sandbox.bare
}

harness "b" {
  command = ["/harness/agent"]
}

# Sprites run Fly's base image: no image needed.
harness "c" {
  command = ["/harness/agent"]
  sandbox = sandbox.sprite
}

# The oracle runs in each task's own image.
harness "d" {
  builtin = "oracle"
  sandbox = sandbox.bare
}
