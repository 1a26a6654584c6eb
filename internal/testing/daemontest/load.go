package daemontest

import (
	"os"
	"strconv"
	"sync"
	"testing"
)

// InParallel calls f for 0 to n-1 from 8 goroutines, as 8 clients at once,
// and returns how many calls failed and the first error.
func InParallel(n int, f func(i int) error) (int64, error) {
	next := make(chan int)
	var mu sync.Mutex
	var failed int64
	var first error
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if failed++; first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return failed, first
}

// FloodSize reads a size from the environment, or returns def.
func FloodSize(t *testing.T, env string, def int) int {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", env, v)
	}
	return n
}
