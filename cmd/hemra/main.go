// Command hemra plans and applies evaluations of AI agents declared in HCL.
package main

import "os"

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}
