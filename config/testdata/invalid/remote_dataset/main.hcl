dataset "tb" {
  source = "harbor:terminal-bench@2.0"
}

dataset "missing" {
  source = "./nowhere"
}

dataset "nosource" {
  include = ["*"]
}

dataset "badglob" {
  source  = "../../tasks"
  include = ["[a-"]
}
