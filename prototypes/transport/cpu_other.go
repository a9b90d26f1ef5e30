//go:build !linux

package main

import "time"

// selfCPU and processCPU are unknown here: the CPU figures are "-".
func selfCPU() time.Duration       { return 0 }
func processCPU(int) time.Duration { return 0 }
