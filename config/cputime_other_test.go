//go:build !unix

package config

import "time"

func processCPU() time.Duration { return 0 }
