// Package config loads an eval directory: every *.hcl file at its root,
// decoded with HCL and evaluated with go-cty into a Config whose blocks keep
// their source ranges. It owns the language (blocks, attributes, variables,
// functions) and every diagnostic found without running anything. It does
// not plan, resolve images, or touch the store.
package config
