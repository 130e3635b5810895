sandbox "d" {
  egress = ["github.com"]
}

sandbox "sp" {
  kind    = "sprites"
  network = "open"
  egress  = ["github.com"]
}

sandbox "sp2" {
  kind   = "sprites"
  egress = ["https://pypi.org/simple"]
}
