//go:build !unix

package main

import "errors"

func writeRusage(string) error { return errors.New("not available on this system") }

func markRusage() {}
