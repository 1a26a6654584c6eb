//go:build !race

package childproc

// raceBuild: this binary was built without -race.
const raceBuild = false
