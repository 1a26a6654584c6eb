package poll_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// printer stands for a test's *testing.T: it prints the failure instead
// of ending the test.
type printer struct{ testing.TB }

func (printer) Helper() {}

func (printer) Fatalf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// Until returns once the condition holds, and otherwise fails the test
// naming what it awaited and what the condition said last.
func ExampleUntil() {
	tries := 0
	poll.Until(printer{}, time.Minute, "the third try", func() (bool, string) {
		tries++
		return tries == 3, fmt.Sprint(tries)
	})
	fmt.Println("held after", tries, "tries")
	poll.Until(printer{}, 300*time.Millisecond, "the impossible", func() (bool, string) { return false, "not yet" })
	// Output:
	// held after 3 tries
	// timed out after 300ms waiting for the impossible; last: not yet
}
