//go:build race

package childproc

// raceBuild: this binary was built with -race.
const raceBuild = true
