locals {
  secret = file("../file_outside_secret.txt")
  absent = file("absent.txt")
  fine   = file("main.hcl")
}
