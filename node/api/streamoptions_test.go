package api

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// FuzzParseStreamOptions: whatever query an exec or attach client sends,
// parseStreamOptions does not panic; a refusal is InvalidInput naming the
// parameter; what it accepts asks for at least one stream, never stderr
// beside a TTY, and reads the same from its canonical query.
func FuzzParseStreamOptions(f *testing.F) {
	for _, seed := range []string{
		"input=1&output=1&tty=1", "stdout=true&stderr=true", "error=1", "output=0&stdout=1",
		"input=yes", "tty=1&error=1", "", "tty=1", "stdin=T&stdin=banana", "%zz&output=1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		q, _ := url.ParseQuery(query) // what it could parse, as r.URL.Query() keeps
		o, err := parseStreamOptions(q)
		if err != nil {
			if !errdefs.IsInvalidInput(err) {
				t.Fatalf("%q: refusal %v is not InvalidInput", query, err)
			}
			named := strings.Contains(err.Error(), "at least one of stdin, stdout and stderr")
			for _, p := range []string{"input", "stdin", "output", "stdout", "error", "stderr", "tty"} {
				named = named || strings.HasPrefix(err.Error(), p+": ")
			}
			if !named {
				t.Fatalf("%q: the refusal names no parameter: %v", query, err)
			}
			return
		}
		if !o.stdin && !o.stdout && !o.stderr || o.tty && o.stderr {
			t.Fatalf("%q: accepted as %+v", query, o)
		}
		canonical := url.Values{}
		for name, v := range map[string]bool{"input": o.stdin, "output": o.stdout, "error": o.stderr, "tty": o.tty} {
			canonical.Set(name, strconv.FormatBool(v))
		}
		if again, err := parseStreamOptions(canonical); err != nil || again != o {
			t.Fatalf("%q: read as %+v, its canonical query %s as %+v (%v)", query, o, canonical.Encode(), again, err)
		}
	})
}
