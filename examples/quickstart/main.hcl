# The two-minute quickstart: four small Harbor-format tasks, run on this
# machine (no Docker needed) by two built-in harnesses. `oracle` runs each
# task's own solution/solve.sh, so it should pass everything; `nop` does
# nothing, so it should fail everything. Together they check the tasks.

hemra {
  required_version = ">= 0.1.0"
}

# A local sandbox is a plain process in the attempt's workspace: no
# isolation at all, which is fine for these trusted scripts.
sandbox "local" {
  kind = "local"
}

harness "oracle" {
  builtin = "oracle"
  sandbox = sandbox.local
}

harness "nop" {
  builtin = "nop"
  sandbox = sandbox.local
}

dataset "quickstart" {
  source = "./tasks"
}

eval "smoke" {
  dataset   = dataset.quickstart
  harnesses = [harness.oracle, harness.nop]
  attempts  = 1
}
