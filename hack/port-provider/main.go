// Command port-provider ports a provider written for the prior
// virtual-kubelet project (the module named in prior-module.txt) to
// this module, whose packages have the same names and signatures: it
// rewrites the imports of its Go files and the requirement of its go.mod.
// Like gofmt, it prints the rewritten files to stdout, or with -w rewrites
// them in place; -l lists the files that would change. Every change is
// reported on stderr as file:line: old -> new.
//
//	go run ./hack/port-provider -w -replace ../virtual-kubelet ./path/to/provider
//
// Files and directories are accepted; directories are walked, skipping
// vendor and hidden directories. In go.mod, the requirement on the prior
// module becomes one on ours at -version, or, with -replace DIR, one
// replaced by the checkout at DIR; with neither, it is removed and the
// report says what to add. An import of the prior project with no
// equivalent here is an error naming the file, the line and what to do;
// nothing is written for a file with errors.
package main

import (
	"bytes"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// priorModuleFile names the module providers are ported from. It is data
// the rewrite matches against, kept out of the Go source so that no Go
// file here names (let alone imports) that module.
//
//go:embed prior-module.txt
var priorModuleFile string

var priorModule = strings.TrimSpace(priorModuleFile)

const ourModule = "github.com/vkubelet/virtual-kubelet"

// paths maps the prior project's packages to ours. MIGRATING.md shows the
// same table; keep them in step.
var paths = map[string]string{
	priorModule + "/node":                ourModule + "/node",
	priorModule + "/node/api":            ourModule + "/node/api",
	priorModule + "/node/nodeutil":       ourModule + "/node/nodeutil",
	priorModule + "/errdefs":             ourModule + "/node/errdefs",
	priorModule + "/log":                 ourModule + "/node/log",
	priorModule + "/log/logrus":          ourModule + "/node/log/logrus",
	priorModule + "/log/klogv2":          ourModule + "/node/log/klogv2",
	priorModule + "/log/slog":            ourModule + "/node/log/slog",
	priorModule + "/trace":               ourModule + "/node/trace",
	priorModule + "/trace/opencensus":    ourModule + "/node/trace/opencensus",
	priorModule + "/trace/opentelemetry": ourModule + "/node/trace/opentelemetry",
	priorModule + "/test/e2e":            ourModule + "/test/e2e",
}

// noEquivalent is what to do about an import with no hint.
const noEquivalent = "it is not part of the prior project's public API that this module ports; replace what you use of it with your own code"

// change is one rewritten import.
type change struct {
	line     int
	from, to string
}

// rewrite returns src with the prior project's import paths replaced, and
// what it replaced. It fails on a parse error or an import it cannot map.
func rewrite(filename string, src []byte) ([]byte, []change, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	var changes []change
	var errs []error
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || (path != priorModule && !strings.HasPrefix(path, priorModule+"/")) {
			continue
		}
		line := fset.Position(imp.Pos()).Line
		to, ok := paths[path]
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: import %q has no equivalent in %s: %s", filename, line, path, ourModule, noEquivalent))
			continue
		}
		imp.Path.Value = strconv.Quote(to)
		changes = append(changes, change{line: line, from: path, to: to})
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	if len(changes) == 0 {
		return src, nil, nil
	}
	var out bytes.Buffer
	if err := format.Node(&out, fset, f); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filename, err)
	}
	return out.Bytes(), changes, nil
}

// sourceFiles returns the .go and go.mod files of the arguments,
// directories walked.
func sourceFiles(args []string) ([]string, error) {
	var files []string
	for _, arg := range args {
		info, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, arg)
			continue
		}
		err = filepath.WalkDir(arg, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() && path != arg && (name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if !d.IsDir() && (strings.HasSuffix(name, ".go") || name == "go.mod") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}

// run ports the files of args; it returns the process's exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("port-provider", flag.ContinueOnError)
	fl.SetOutput(stderr)
	write := fl.Bool("w", false, "write the result to the files instead of stdout")
	list := fl.Bool("l", false, "only list the files that would change")
	version := fl.String("version", "", "the version of "+ourModule+" go.mod files require")
	replace := fl.String("replace", "", "a local checkout of "+ourModule+" that go.mod files replace it with")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: port-provider [-w | -l] [-version V | -replace DIR] FILE_OR_DIR...\n\n"+
			"Rewrites imports of %s, and go.mod requirements on it, to %s.\n\n", priorModule, ourModule)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() == 0 {
		fl.Usage()
		return 2
	}
	if *write && *list {
		fmt.Fprintln(stderr, "port-provider: -w and -l cannot be used together")
		return 2
	}
	target, err := modTargetOf(*version, *replace)
	if err != nil {
		fmt.Fprintln(stderr, "port-provider:", err)
		return 2
	}
	files, err := sourceFiles(fl.Args())
	if err != nil {
		fmt.Fprintln(stderr, "port-provider:", err)
		return 1
	}
	code := 0
	for _, file := range files {
		if err := portFile(file, target, *write, *list, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, err)
			code = 1
		}
	}
	return code
}

// modTargetOf checks the -version and -replace flags.
func modTargetOf(version, replace string) (modTarget, error) {
	switch {
	case version != "" && replace != "":
		return modTarget{}, errors.New("-version and -replace cannot be used together: a replaced module's version does not matter")
	case version != "":
		if !semver.IsValid(version) || semver.Canonical(version) != version {
			return modTarget{}, fmt.Errorf("-version %q is not a canonical semantic version such as v0.1.0", version)
		}
		return modTarget{version: version}, nil
	case replace != "":
		dir, err := filepath.Abs(replace)
		if err != nil {
			return modTarget{}, err
		}
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return modTarget{}, fmt.Errorf("-replace %s: not a checkout of %s: %w", replace, ourModule, err)
		}
		if modfile.ModulePath(gomod) != ourModule {
			return modTarget{}, fmt.Errorf("-replace %s: its go.mod is module %q, not %s", replace, modfile.ModulePath(gomod), ourModule)
		}
		return modTarget{version: replacedVersion, dir: dir}, nil
	}
	return modTarget{}, nil
}

func portFile(file string, target modTarget, write, list bool, stdout, stderr io.Writer) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var (
		out     []byte
		changes []change
		notes   []note
	)
	if filepath.Base(file) == "go.mod" {
		out, changes, notes, err = rewriteMod(file, src, target)
	} else {
		out, changes, err = rewrite(file, src)
	}
	if err != nil {
		return err
	}
	if len(changes) == 0 && len(notes) == 0 {
		return nil
	}
	for _, c := range changes {
		fmt.Fprintf(stderr, "%s:%d: %s -> %s\n", file, c.line, c.from, c.to)
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "%s:%d: %s\n", file, n.line, n.text)
	}
	switch {
	case list:
		fmt.Fprintln(stdout, file)
	case write:
		info, err := os.Stat(file)
		if err != nil {
			return err
		}
		return os.WriteFile(file, out, info.Mode().Perm())
	default:
		_, err = stdout.Write(out)
	}
	return err
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
