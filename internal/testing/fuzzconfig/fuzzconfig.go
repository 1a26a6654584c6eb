// Package fuzzconfig holds what the fuzz targets of the --provider-config
// loaders share: each input is written to a file, as the daemon reads it,
// and an accepted config must survive being written back and loaded again.
package fuzzconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Fuzz is the fuzz target of a loader: the seeds (files' contents), Check
// on every input, and check on each config load accepted.
func Fuzz[C any](f *testing.F, seeds []string, load func(path string) (*C, error), check func(*testing.T, *C)) {
	for _, seed := range seeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if cfg := Check(t, data, load); cfg != nil {
			check(t, cfg)
		}
	})
}

// File writes data to a file of its own under t's temporary directory and
// returns its path.
func File(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "provider-config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// NamesFile fails t unless err, a loader's refusal of the file at path,
// says which file it was: the daemon's operator must find what to fix.
func NamesFile(t *testing.T, path string, err error) {
	t.Helper()
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("the error does not name the file %s: %v", path, err)
	}
}

// Check loads data as a --provider-config file with load and checks what
// every loader promises: no panic; a refusal names the file and, when the
// file is well-formed YAML of C's fields, begins with the field that is
// wrong; and what is accepted passes RoundTrip. It returns the accepted
// config, or nil.
func Check[C any](t *testing.T, data []byte, load func(path string) (*C, error)) *C {
	t.Helper()
	path := File(t, data)
	cfg, err := load(path)
	if err == nil {
		RoundTrip(t, cfg, load)
		return cfg
	}
	NamesFile(t, path, err)
	if yaml.UnmarshalStrict(data, new(C)) != nil {
		return nil // the decoder's own message, which names the field it could not read
	}
	msg := strings.TrimPrefix(err.Error(), "provider config "+path+": ")
	for _, field := range fieldNames(reflect.TypeFor[C]()) {
		if rest, ok := strings.CutPrefix(msg, field); ok && (rest == "" || strings.ContainsRune(":. [", rune(rest[0]))) {
			return nil
		}
	}
	t.Fatalf("the error does not begin with the field that is wrong (one of %v): %v", fieldNames(reflect.TypeFor[C]()), err)
	return nil
}

// fieldNames are the names of a struct type's fields in its files: their
// json tags.
func fieldNames(typ reflect.Type) []string {
	var names []string
	for i := range typ.NumField() {
		if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// RoundTrip fails t unless cfg, a config load accepted (its defaults filled
// in), written back as YAML, is accepted again by load and loads equal:
// what the loader accepts it can also read back, and validating twice
// changes nothing.
func RoundTrip[C any](t *testing.T, cfg *C, load func(path string) (*C, error)) {
	t.Helper()
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatalf("an accepted config does not marshal: %v\n%#v", err, cfg)
	}
	again, err := load(File(t, data))
	if err != nil {
		t.Fatalf("an accepted config, written back, is refused: %v\n%s", err, data)
	}
	// Compared as written: an empty map or list is left out, and read
	// back as nil.
	if data2, err := yaml.Marshal(again); err != nil || !bytes.Equal(data, data2) {
		t.Fatalf("an accepted config, written back, loads different (%v):\nfirst\n%s\nsecond\n%s", err, data, data2)
	}
}
