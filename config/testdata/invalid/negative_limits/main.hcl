sandbox "s" {
  cpus = -1
  pids = -5
}
