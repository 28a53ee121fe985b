package main

import (
	"os"
	"runtime/pprof"
)

// startCPUProfile starts profiling the CPU into path and returns the
// function that stops it.
func startCPUProfile(path string) (stop func(), err error) {
	pf, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}

// writeAllocProfile writes the allocations sampled since the start to path.
func writeAllocProfile(path string) error {
	pf, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(pf, 0); err != nil {
		pf.Close()
		return err
	}
	return pf.Close()
}
