package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/commands"
)

// pagePath is docs/flags.md from this package's directory.
var pagePath = filepath.Join("..", "..", "docs", "flags.md")

// TestFlagsPage fails when docs/flags.md is not what `make docs` writes
// today: a flag added, removed or reworded without regenerating the page.
func TestFlagsPage(t *testing.T) {
	got, err := os.ReadFile(pagePath)
	if err != nil {
		t.Fatalf("reading docs/flags.md: %v; run `make docs`", err)
	}
	want := render(commands.NewRootCommand())
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/flags.md is stale: run `make docs` and commit the result\n%s", firstDifference(got, want))
	}
}

// TestStalePageIsCaught is the negative control of TestFlagsPage: a
// command with one flag more renders to a page that differs from the
// committed one.
func TestStalePageIsCaught(t *testing.T) {
	committed, err := os.ReadFile(pagePath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := commands.NewRootCommand()
	cmd.Flags().Bool("a-flag-nobody-documented", false, "a flag added after the page was generated")
	page := render(cmd)
	if bytes.Equal(committed, page) {
		t.Fatal("a page rendered with an extra flag equals the committed page: the staleness check cannot fail")
	}
	if !bytes.Contains(page, []byte("`--a-flag-nobody-documented`")) {
		t.Fatalf("the extra flag is not on the rendered page:\n%s", page)
	}
}

// TestPageIsDeterministic renders the page twice and checks that the
// machine it runs on does not show: the node name's default is the host's.
func TestPageIsDeterministic(t *testing.T) {
	first, second := render(commands.NewRootCommand()), render(commands.NewRootCommand())
	if !bytes.Equal(first, second) {
		t.Fatalf("two renderings differ\n%s", firstDifference(first, second))
	}
	row := regexp.MustCompile("(?m)^\\| `--nodename string` \\| ([^|]*) \\|").FindSubmatch(first)
	if row == nil {
		t.Fatalf("no --nodename row on the page:\n%s", first)
	}
	if got := strings.TrimSpace(string(row[1])); got != "the host name, in lower case" {
		t.Fatalf("--nodename's default on the page is %q, want it in words, not this machine's name", got)
	}
}

// TestGroupsAsHelpShowsThem checks that the page's groups of the daemon's
// flags come in the order `virtual-kubelet --help` prints them.
func TestGroupsAsHelpShowsThem(t *testing.T) {
	cmd := commands.NewRootCommand()
	var help bytes.Buffer
	cmd.SetOut(&help)
	cmd.SetErr(&help)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var inHelp []string
	for _, m := range regexp.MustCompile(`(?m)^(.+) flags:$`).FindAllStringSubmatch(help.String(), -1) {
		if m[1] != "Global" {
			inHelp = append(inHelp, m[1])
		}
	}
	page := string(render(commands.NewRootCommand()))
	daemon := page[:strings.Index(page, "\n## virtual-kubelet ")]
	var onPage []string
	for _, m := range regexp.MustCompile(`(?m)^### (.+)$`).FindAllStringSubmatch(daemon, -1) {
		onPage = append(onPage, m[1])
	}
	if len(inHelp) == 0 || strings.Join(inHelp, ", ") != strings.Join(onPage, ", ") {
		t.Fatalf("groups in --help: %q; on the page: %q", inHelp, onPage)
	}
}

// firstDifference names the first line where two pages differ.
func firstDifference(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, x, y)
		}
	}
	return "(the same lines)"
}
