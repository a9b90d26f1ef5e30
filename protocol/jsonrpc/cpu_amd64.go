//go:build amd64 && !purego

package jsonrpc

// hasAVX2 says the CPU and the OS support AVX2, which the assembly loops
// of base64_amd64.s and scan_amd64.s need.
var hasAVX2 = cpuHasAVX2()

// cpuHasAVX2 asks CPUID for AVX2 and XGETBV for the OS saving the YMM
// registers.
func cpuHasAVX2() bool
