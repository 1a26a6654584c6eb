package poll

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilReturnsOnceCondHolds(t *testing.T) {
	n := 0
	Until(t, time.Minute, "the third call", func() (bool, string) {
		n++
		return n == 3, fmt.Sprint(n)
	})
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
}

// fatalTB records Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestUntilFailsNamingWhatAndLast(t *testing.T) {
	tb := &fatalTB{TB: t}
	Until(tb, 300*time.Millisecond, "the impossible", func() (bool, string) { return false, "  not yet\n" })
	for _, want := range []string{"timed out after 300ms", "the impossible", "last: not yet"} {
		if !strings.Contains(tb.msg, want) {
			t.Errorf("failure %q lacks %q", tb.msg, want)
		}
	}
}
