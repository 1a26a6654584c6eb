package slurm

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"
)

// testLog is a log file's text: two stdout lines, a partial one, a stderr line
// and a line from before records were kept.
const testLog = "2026-01-02T03:04:05.100000000Z stdout F one\n" +
	"2026-01-02T03:04:06.200000000Z stdout P prompt: \n" +
	"2026-01-02T03:04:07.300000000Z stderr F two\n" +
	"2026-01-02T03:04:08.000000000Z stdout F three\n" +
	"plain line\n"

func readTestLog(t *testing.T, since time.Time, timestamps bool) string {
	t.Helper()
	r := io.NopCloser(strings.NewReader(testLog))
	out, err := io.ReadAll(&logReader{rs: &records{r: bufio.NewReader(r), c: r}, since: since, timestamps: timestamps})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestLogReaderAsKubectlShowsIt: records lose their stamps, stream and tag
// (a partial line keeps no newline), keep their time with timestamps, and
// since leaves out the older ones, unstamped lines included.
func TestLogReaderAsKubectlShowsIt(t *testing.T) {
	if got, want := readTestLog(t, time.Time{}, false), "one\nprompt: two\nthree\nplain line\n"; got != want {
		t.Errorf("plain: %q, want %q", got, want)
	}
	want := "2026-01-02T03:04:05.1Z one\n2026-01-02T03:04:06.2Z prompt: 2026-01-02T03:04:07.3Z two\n2026-01-02T03:04:08Z three\nplain line\n"
	if got := readTestLog(t, time.Time{}, true); got != want {
		t.Errorf("timestamps: %q, want %q", got, want)
	}
	if got, want := readTestLog(t, time.Date(2026, 1, 2, 3, 4, 7, 300000000, time.UTC), false), "two\nthree\n"; got != want {
		t.Errorf("since: %q, want %q", got, want)
	}
}

func TestParseRecordSplitsStreams(t *testing.T) {
	rec := parseRecord([]byte("2026-01-02T03:04:07.3Z stderr F a b c\n"))
	if !rec.stderr || string(rec.text) != "a b c\n" || rec.time.IsZero() {
		t.Errorf("stderr record: %+v", rec)
	}
	for _, line := range []string{"2026-01-02 x\n", "2026-01-02T03:04:07Z stdin F x\n", "2026-01-02T03:04:07Z stdout X x\n", "\n"} {
		if rec := parseRecord([]byte(line)); rec.stderr || !rec.time.IsZero() || string(rec.text) != line {
			t.Errorf("%q is not a record, got %+v", line, rec)
		}
	}
}
