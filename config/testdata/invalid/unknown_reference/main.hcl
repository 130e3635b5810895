locals {
  a = foo.bar
  b = sandbox
  c = path.module
}
