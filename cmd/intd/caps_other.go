//go:build !linux

package main

// Capabilities are Linux's; elsewhere there is none to check or drop.
type capability int

const (
	capNetAdmin capability = iota
	capNetRaw
	capBPF
	capPerfmon
	capSysAdmin
)

func capName(c capability) string                  { return "capability" }
func haveCap(c capability) bool                     { return true }
func dropCaps(keep []capability) ([]string, error) { return nil, nil }
func kernelRelease() string                         { return "" }
func fileExists(path string) bool                   { return false }
