// Writes a real CPU profile with Go's runtime/pprof: a host-only profile with no CUDA kernel frame, the
// fixture of import_samples' "no kernel frames" refusal. Run by ../make_pprof_fixtures.py:
//   go run . OUT.pb.gz
package main

import (
	"os"
	"runtime/pprof"
	"time"
)

//go:noinline
func spin(n int) float64 {
	x := 0.0
	for i := 0; i < n; i++ {
		x += float64(i%7) * 1.0000001
	}
	return x
}

func main() {
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	end := time.Now().Add(600 * time.Millisecond)
	s := 0.0
	for time.Now().Before(end) {
		s += spin(200000)
	}
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		panic(err)
	}
	if s < 0 {
		println(s)
	}
}
