package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
)

// importsOf are the import paths of the package qualifiers the reference
// list uses, per prior package ("v1" means different packages in each).
var importsOf = map[string]map[string]string{
	"node": {
		"corev1":          "k8s.io/api/core/v1",
		"v1":              "k8s.io/client-go/kubernetes/typed/core/v1",
		"coordclientset":  "k8s.io/client-go/kubernetes/typed/coordination/v1",
		"corev1client":    "k8s.io/client-go/kubernetes/typed/core/v1",
		"corev1informers": "k8s.io/client-go/informers/core/v1",
		"record":          "k8s.io/client-go/tools/record",
		"workqueue":       "k8s.io/client-go/util/workqueue",
	},
	"node/api": {
		"v1":            "k8s.io/api/core/v1",
		"dto":           "github.com/prometheus/client_model/go",
		"statsv1alpha1": "k8s.io/kubelet/pkg/apis/stats/v1alpha1",
	},
	"node/nodeutil": {
		"v1":                   "k8s.io/api/core/v1",
		"kubernetes":           "k8s.io/client-go/kubernetes",
		"kubeinformers":        "k8s.io/client-go/informers",
		"coordclientset":       "k8s.io/client-go/kubernetes/typed/coordination/v1",
		"user":                 "k8s.io/apiserver/pkg/authentication/user",
		"authenticator":        "k8s.io/apiserver/pkg/authentication/authenticator",
		"authorizer":           "k8s.io/apiserver/pkg/authorization/authorizer",
		"authenticatorfactory": "k8s.io/apiserver/pkg/authentication/authenticatorfactory",
		"authorizerfactory":    "k8s.io/apiserver/pkg/authorization/authorizerfactory",
		"corev1listers":        "k8s.io/client-go/listers/core/v1",
		"record":               "k8s.io/client-go/tools/record",
		"dto":                  "github.com/prometheus/client_model/go",
		"statsv1alpha1":        "k8s.io/kubelet/pkg/apis/stats/v1alpha1",
	},
	"errdefs":             {},
	"log":                 {},
	"trace":               {},
	"log/logrus":          {"logrus": "github.com/sirupsen/logrus"},
	"log/klogv2":          {},
	"log/slog":            {"slog": "log/slog"},
	"trace/opencensus":    {},
	"trace/opentelemetry": {},
	"test/e2e":            {"testing": "testing", "rest": "k8s.io/client-go/rest"},
}

var commonImports = map[string]string{"context": "context", "time": "time", "io": "io", "http": "net/http", "tls": "crypto/tls"}

var (
	typeRE   = regexp.MustCompile(`^type (\w+) (struct|interface) ?\{\}?$`)
	opaqueRE = regexp.MustCompile(`^type (\w+) struct\{ /\* unexported \*/ \}$`)
	// fieldFuncRE finds the func type a field's comment gives when the
	// field's own type is an internal package's.
	fieldFuncRE = regexp.MustCompile(`//\s*(func\([^)]*\)(?: \w+)?)`)
	typedVarRE  = regexp.MustCompile(`^var (\w+) (\w+) = `)
	funcDeclRE  = regexp.MustCompile(`^func (\w+)(\(.*)$`)
	methDeclRE  = regexp.MustCompile(`^func \((?:\w+\s+)?(\*?)(\w+)\) (\w+)(\(.*)$`)
	otherTypeRE = regexp.MustCompile(`^type (\w+) ([^=].*)$`)
	constRE     = regexp.MustCompile(`^const (\w+) = (.+)$`)
)

// qualify prefixes the exported identifiers of a type expression that are
// not already qualified with pkg, so they name the package under test.
func qualify(t *testing.T, expr, pkg string, declared map[string]bool) string {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Fatalf("reference type %q: %v", expr, err)
	}
	skip := map[*ast.Ident]bool{}
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			skip[n.Sel] = true
			if id, ok := n.X.(*ast.Ident); ok {
				skip[id] = true
			}
		case *ast.Field:
			for _, id := range n.Names {
				skip[id] = true
			}
		case *ast.Ident:
			if !skip[n] && declared[n.Name] {
				n.Name = pkg + "." + n.Name
			}
		}
		return true
	})
	if ft, ok := e.(*ast.FuncType); ok {
		ft.Params, ft.Results = unnamed(ft.Params), unnamed(ft.Results)
	}
	var b bytes.Buffer
	if err := printer.Fprint(&b, token.NewFileSet(), e); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// unnamed drops the names of a parameter list, one field per name, so a
// receiver can be prepended to it.
func unnamed(fl *ast.FieldList) *ast.FieldList {
	if fl == nil {
		return nil
	}
	out := &ast.FieldList{}
	for _, f := range fl.List {
		for range max(1, len(f.Names)) {
			out.List = append(out.List, &ast.Field{Type: f.Type})
		}
	}
	return out
}

// signatureChecks turns one package's section of the reference list into
// package-level declarations that compile only if our package has the same
// signatures: functions and methods assigned to their func types, struct
// fields to their types, interfaces and other types to and from their
// underlying types, typed variables to their types, constants to their
// values (in a map literal with keys false and "equal", a duplicate key if
// they differ).
func signatureChecks(t *testing.T, pkg string, lines []string) string {
	t.Helper()
	declared := map[string]bool{}
	for _, l := range lines {
		if m := regexp.MustCompile(`^type (\w+)`).FindStringSubmatch(l); m != nil {
			declared[m[1]] = true
		}
	}
	q := func(expr string) string { return qualify(t, expr, pkg, declared) }
	var out []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case opaqueRE.MatchString(l):
			out = append(out, fmt.Sprintf("var _ = %s.%s{}", pkg, opaqueRE.FindStringSubmatch(l)[1]))
		case methDeclRE.MatchString(l):
			m := methDeclRE.FindStringSubmatch(l)
			recv := m[1] + pkg + "." + m[2]
			ft := q("func" + m[4])
			params := strings.TrimPrefix(ft, "func(")
			sep := ", "
			if strings.HasPrefix(params, ")") {
				sep = ""
			}
			out = append(out, fmt.Sprintf("var _ func(%s%s%s = (%s).%s", recv, sep, params, recv, m[3]))
		case funcDeclRE.MatchString(l):
			m := funcDeclRE.FindStringSubmatch(l)
			out = append(out, fmt.Sprintf("var _ %s = %s.%s", q("func"+m[2]), pkg, m[1]))
		case typeRE.MatchString(l):
			m := typeRE.FindStringSubmatch(l)
			body := []string{}
			for !strings.HasSuffix(l, "}") {
				i++
				l = lines[i]
				if l != "}" && strings.TrimSpace(l) != "" {
					body = append(body, strings.TrimSpace(l))
				}
			}
			if m[2] == "interface" {
				lit := q("interface{\n" + strings.Join(body, "\n") + "\n}")
				out = append(out, fmt.Sprintf("var _ %s.%s = (%s)(nil)", pkg, m[1], lit),
					fmt.Sprintf("var _ %s = %s.%s(nil)", lit, pkg, m[1]))
				continue
			}
			for _, f := range body {
				decl, comment, _ := strings.Cut(f, "//")
				name, typ, _ := strings.Cut(strings.Join(strings.Fields(decl), " "), " ")
				if fm := fieldFuncRE.FindStringSubmatch("//" + comment); fm != nil && !declared[typ] {
					// The field takes a func literal of that type.
					out = append(out, fmt.Sprintf("var _ = %s.%s{%s: (%s)(nil)}", pkg, m[1], name, fm[1]))
					continue
				}
				out = append(out, fmt.Sprintf("var _ %s = %s.%s{}.%s", q(typ), pkg, m[1], name))
			}
		case otherTypeRE.MatchString(l):
			m := otherTypeRE.FindStringSubmatch(l)
			out = append(out, fmt.Sprintf("var _ %s.%s = (%s)(nil)", pkg, m[1], q(m[2])))
		case constRE.MatchString(l):
			m := constRE.FindStringSubmatch(l)
			out = append(out, fmt.Sprintf("var _ = map[bool]int{false: 0, %s.%s == %s: 1}", pkg, m[1], q(m[2])))
		case typedVarRE.MatchString(l):
			m := typedVarRE.FindStringSubmatch(l)
			out = append(out, fmt.Sprintf("var _ %s = %s.%s", q(m[2]), pkg, m[1]))
		}
	}
	return strings.Join(out, "\n")
}

// TestUpstreamSignaturesCompile: code written against the prior project's
// signatures compiles against ours. Each package's checks are generated
// into a file of a throwaway package that go build compiles through an
// overlay, so nothing is written to the tree.
func TestUpstreamSignaturesCompile(t *testing.T) {
	sections, headerTypes := upstreamAPI(t)
	// The header gives the signature of node's alias of an internal type.
	sections["node"] = append(headerTypes, sections["node"]...)
	for rel, lines := range sections {
		if len(lines) == 0 {
			delete(sections, rel) // nothing to check
		}
	}
	root := repoRoot(t)
	dir := t.TempDir()
	overlay := map[string]string{}
	for rel, lines := range sections {
		ours := paths[priorModule+"/"+rel]
		name := filepath.Base(ours)
		// The package under test is imported as "tested", so that its name
		// may be that of a package its signatures use (log/slog's slog).
		checks := signatureChecks(t, "tested", lines)
		if name == "node" {
			// Values of node's aliased queue package: a retry policy and a count.
			checks += "\nvar _ tested.ShouldRetryFunc = tested.DefaultRetryFunc\nvar _ int = tested.MaxRetries"
		}
		imports := map[string]string{"tested": ours}
		for alias, path := range commonImports {
			imports[alias] = path
		}
		for alias, path := range importsOf[rel] {
			imports[alias] = path
		}
		for _, dep := range []string{"node", "api", "log", "trace"} {
			if _, ok := imports[dep]; !ok {
				imports[dep] = ourModule + "/node"
				if dep != "node" {
					imports[dep] += "/" + dep
				}
			}
		}
		var src strings.Builder
		src.WriteString("package sigcheck\n\nimport (\n")
		for alias, path := range imports {
			if strings.Contains(checks, alias+".") {
				fmt.Fprintf(&src, "\t%s %q\n", alias, path)
			}
		}
		src.WriteString(")\n\n" + checks + "\n")
		file := filepath.Join(dir, strings.ReplaceAll(rel, "/", "_")+".go")
		if err := os.WriteFile(file, []byte(src.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(root, "hack/port-provider/sigcheck", filepath.Base(file))] = file
	}
	ov, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	ovFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	vet := exec.Command("go", append(append([]string{"build"}, childproc.BuildFlags()...), "-overlay", ovFile, "./hack/port-provider/sigcheck")...)
	vet.Dir = root
	if out, err := vet.CombinedOutput(); err != nil {
		t.Errorf("signatures of the prior project that do not compile against ours:\n%s", out)
	}
}
