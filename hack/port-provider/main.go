// Command port-provider rewrites the imports of a provider written for the
// prior virtual-kubelet project (github.com/virtual-kubelet/virtual-kubelet)
// to this module's packages, which have the same names and signatures. Like
// gofmt, it prints the rewritten files to stdout, or with -w rewrites them in
// place; -l lists the files that would change. Every rewritten import is
// reported on stderr.
//
//	go run ./hack/port-provider -w ./path/to/provider
//
// Files and directories are accepted; directories are walked, skipping
// vendor and hidden directories. An import of the prior project with no
// equivalent here is an error naming the file and the import; nothing is
// written for a file with errors.
package main

import (
	"bytes"
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
)

const (
	priorModule = "github.com/virtual-kubelet/virtual-kubelet"
	ourModule   = "github.com/vkubelet/virtual-kubelet"
)

// paths maps the prior project's packages to ours. MIGRATING.md shows the
// same table; keep them in step.
var paths = map[string]string{
	priorModule + "/node":          ourModule + "/node",
	priorModule + "/node/api":      ourModule + "/node/api",
	priorModule + "/node/nodeutil": ourModule + "/node/nodeutil",
	priorModule + "/errdefs":       ourModule + "/node/errdefs",
	priorModule + "/log":           ourModule + "/node/log",
	priorModule + "/trace":         ourModule + "/node/trace",
}

// hints say what to do instead for prior packages with no equivalent.
var hints = map[string]string{
	priorModule + "/log/logrus":       "log.L already writes to logrus; wrap an entry with log.FromLogrus",
	priorModule + "/trace/opencensus": "trace.T already records OpenCensus spans; drop the import and its setup",
}

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
			msg := fmt.Sprintf("%s:%d: import %q has no equivalent in %s", filename, line, path, ourModule)
			if h := hints[path]; h != "" {
				msg += ": " + h
			}
			errs = append(errs, errors.New(msg))
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

// goFiles returns the .go files of the arguments, directories walked.
func goFiles(args []string) ([]string, error) {
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
			if !d.IsDir() && strings.HasSuffix(name, ".go") {
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
	list := fl.Bool("l", false, "only list the files whose imports would change")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: port-provider [-w | -l] FILE_OR_DIR...\n\n"+
			"Rewrites imports of %s to %s.\n\n", priorModule, ourModule)
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
	files, err := goFiles(fl.Args())
	if err != nil {
		fmt.Fprintln(stderr, "port-provider:", err)
		return 1
	}
	code := 0
	for _, file := range files {
		if err := portFile(file, *write, *list, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, err)
			code = 1
		}
	}
	return code
}

func portFile(file string, write, list bool, stdout, stderr io.Writer) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, changes, err := rewrite(file, src)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		return nil
	}
	for _, c := range changes {
		fmt.Fprintf(stderr, "%s:%d: %s -> %s\n", file, c.line, c.from, c.to)
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
