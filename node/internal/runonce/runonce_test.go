package runonce

import (
	"errors"
	"testing"
	"time"
)

// TestOnce: a second Start fails; Finish closes Done, records the error
// and runs the funcs given before it and after it.
func TestOnce(t *testing.T) {
	r := New()
	if err := r.Start("thing"); err != nil {
		t.Fatal(err)
	}
	if err := r.Start("thing"); err == nil {
		t.Error("a second Start succeeded")
	}
	ran := make(chan string, 2)
	r.AfterFinish(func() { ran <- "before" })
	if r.Result() != nil {
		t.Error("Result is set while the run goes on")
	}
	boom := errors.New("boom")
	r.Finish(boom)
	<-r.Done()
	if !errors.Is(r.Result(), boom) {
		t.Errorf("Result %v, want %v", r.Result(), boom)
	}
	r.AfterFinish(func() { ran <- "after" })
	got := map[string]bool{}
	for range 2 {
		select {
		case f := <-ran:
			got[f] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("AfterFinish funcs run: %v, want before and after", got)
		}
	}
}
