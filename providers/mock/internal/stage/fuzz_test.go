package stage

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParse: whatever a stage file holds, Parse returns stages or one line
// naming the file, and the stages it returns match, delay and render
// without panicking.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(shipped, "*.yaml"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		stages, err := Parse("f.yaml", data, testEnv)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "stage file f.yaml") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: not one line naming the file", msg)
			}
			return
		}
		obj := objectOf(t, webPod(map[string]string{"a": "1s"}))
		rnd := rand.New(rand.NewPCG(1, 1))
		for _, s := range stages {
			if s.sel != nil {
				_, _ = s.matches(obj)
			}
			_, _, _ = s.Weight(obj)
			_, _ = s.Delay(obj, time.Now(), rnd)
			for _, st := range s.Steps() {
				if st.Patch != nil {
					_, _ = st.Patch.Apply(obj, s.kind)
				}
				if st.Finalizers != nil {
					_, _ = st.Finalizers.JSONPatch([]string{"x", "y"})
				}
			}
		}
	})
}
