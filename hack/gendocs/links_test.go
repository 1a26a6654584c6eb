package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's top from this package's directory.
var repoRoot = filepath.Join("..", "..")

// mdLink is an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks checks every relative link in the repository's Markdown
// files: the file it names exists, and so does the heading its #anchor
// names. A page moved or a heading renamed without its links fails here.
func TestDocLinks(t *testing.T) {
	pages, err := markdownFiles(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("found %d Markdown files under %s; expected the README, BENCHMARKS.md and docs/", len(pages), repoRoot)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a, err := headingAnchors(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = a
		return a
	}
	checked := 0
	for _, page := range pages {
		links, err := relativeLinks(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			checked++
			file, anchor, _ := strings.Cut(l.target, "#")
			target := page
			if file != "" {
				target = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", rel(page), l.line, l.target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[anchor] {
				t.Errorf("%s:%d: link to %s: %s has no heading #%s", rel(page), l.line, l.target, rel(target), anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the check checked nothing")
	}
}

// TestDocLinksCatchesABrokenLink is TestDocLinks' negative control: a page
// linking to a missing file and a missing heading yields both.
func TestDocLinksCatchesABrokenLink(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "page.md")
	text := "# Title\n\n## A heading, with `code`\n\n[ok](#a-heading-with-code) [gone](missing.md) [bad](#no-such-heading)\n\n```\n[in a code block](ignored.md)\n```\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	links, err := relativeLinks(page)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, l := range links {
		targets = append(targets, l.target)
	}
	if got := strings.Join(targets, " "); got != "#a-heading-with-code missing.md #no-such-heading" {
		t.Fatalf("links found: %q", got)
	}
	a, err := headingAnchors(page)
	if err != nil {
		t.Fatal(err)
	}
	if !a["a-heading-with-code"] || a["no-such-heading"] {
		t.Fatalf("anchors: %v", a)
	}
}

// link is one relative link of a page.
type link struct {
	target string
	line   int
}

// markdownFiles lists the .md files under root, leaving out version
// control, build output and dependencies.
func markdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", "vendor", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// relativeLinks returns the links of a page that point into the
// repository, outside fenced code blocks.
func relativeLinks(path string) ([]link, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var links []link
	inFence := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(line), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links = append(links, link{target, n})
		}
	}
	return links, s.Err()
}

// stripCode blanks inline code spans, where a ](x) is text, not a link,
// but keeps a code span that is a link's text.
func stripCode(line string) string {
	return regexp.MustCompile("`[^`]*`").ReplaceAllStringFunc(line, func(code string) string {
		return strings.Repeat("x", len(code))
	})
}

// headingAnchors returns the anchors GitHub gives a page's headings:
// lower case, punctuation dropped, spaces as hyphens, repeats numbered.
func headingAnchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var slug strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				slug.WriteRune(r)
			}
		}
		a := slug.String()
		if k := seen[a]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors, nil
}

// rel names a file from the repository's top, for messages.
func rel(path string) string {
	if r, err := filepath.Rel(repoRoot, path); err == nil {
		return r
	}
	return path
}
