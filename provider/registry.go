package provider

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

var (
	mu       sync.RWMutex
	registry = map[string]InitFunc{}
)

// Register makes a provider available under name. It is called from init
// functions at compile time; registering a name twice is a programming error
// and panics, as with database/sql drivers.
func Register(name string, f InitFunc) {
	mu.Lock()
	defer mu.Unlock()
	if f == nil {
		panic("provider: Register of a nil InitFunc for " + name)
	}
	if _, dup := registry[name]; dup {
		panic("provider: Register called twice for " + name)
	}
	registry[name] = f
}

// Get returns the InitFunc registered under name, or an error listing the
// names that are registered.
func Get(name string) (InitFunc, error) {
	mu.RLock()
	defer mu.RUnlock()
	if f, ok := registry[name]; ok {
		return f, nil
	}
	known := names()
	if len(known) == 0 {
		return nil, fmt.Errorf("unknown provider %q: this binary was built without providers", name)
	}
	return nil, fmt.Errorf("unknown provider %q (known: %s)", name, strings.Join(known, ", "))
}

// Names lists the registered providers, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return names()
}

func names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
