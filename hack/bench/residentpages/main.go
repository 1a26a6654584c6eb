// Command residentpages tells which of a Go binary's pages a running process
// holds in memory: by ELF section, and for the code by Go package. A
// process's RSS counts the pages of its binary it has touched, and the
// kernel maps a fault's neighbours too (64 KiB around it), so the binary's
// share of RSS depends on how much of the code and tables a run reaches,
// not on the file's size (BENCHMARKS.md, "1,000 idle nodes"):
//
//	go run ./hack/bench/residentpages -pid "$(pgrep -f '^bin/virtual-kubelet')"
//
// It reads /proc/PID/maps and /proc/PID/pagemap, which needs root (or
// CAP_SYS_ADMIN) for another user's process.
package main

import (
	"cmp"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	pid := flag.Int("pid", 0, "the process")
	top := flag.Int("top", 30, "packages to list")
	flag.Parse()
	if *pid <= 0 {
		log.Fatal("-pid is required")
	}
	r, err := measure(*pid)
	if err != nil {
		log.Fatal(err)
	}
	r.print(os.Stdout, *top)
}

const pageSize = 4096

// report is a process's resident pages of its binary.
type report struct {
	binary string
	pages  int
	// sections and packages count resident pages; a page of code is the
	// package of the function at its start.
	sections, packages map[string]int
}

// measure reads which pages of its executable the process pid has resident.
func measure(pid int) (*report, error) {
	proc := "/proc/" + strconv.Itoa(pid)
	exe, err := os.Readlink(proc + "/exe")
	if err != nil {
		return nil, err
	}
	f, err := elf.Open(exe)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	code, err := codeSymbols(f)
	if err != nil {
		return nil, err
	}
	pages, err := residentPages(proc, exe)
	if err != nil {
		return nil, err
	}
	r := &report{binary: exe, pages: len(pages), sections: map[string]int{}, packages: map[string]int{}}
	for _, addr := range pages {
		s := sectionOf(f, addr)
		r.sections[s]++
		if s == ".text" {
			r.packages[code.packageAt(addr)]++
		}
	}
	return r, nil
}

// residentPages returns the addresses of the resident pages of the process's
// mappings of exe.
func residentPages(proc, exe string) ([]uint64, error) {
	maps, err := os.ReadFile(proc + "/maps")
	if err != nil {
		return nil, err
	}
	pagemap, err := os.Open(proc + "/pagemap")
	if err != nil {
		return nil, err
	}
	defer pagemap.Close()
	var pages []uint64
	for line := range strings.Lines(string(maps)) {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s/maps: bad range %q", proc, fields[0])
		}
		// One 64-bit entry a page; bit 63 is "present".
		entries := make([]byte, (end-start)/pageSize*8)
		if _, err := pagemap.ReadAt(entries, int64(start/pageSize*8)); err != nil {
			return nil, fmt.Errorf("%s/pagemap: %w", proc, err)
		}
		for i := 0; i < len(entries); i += 8 {
			if binary.LittleEndian.Uint64(entries[i:])>>63 == 1 {
				pages = append(pages, start+uint64(i/8)*pageSize)
			}
		}
	}
	if len(pages) == 0 {
		return nil, fmt.Errorf("no resident page of %s in %s/pagemap (not root?)", exe, proc)
	}
	return pages, nil
}

func sectionOf(f *elf.File, addr uint64) string {
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Addr <= addr && addr < s.Addr+s.Size {
			return s.Name
		}
	}
	return "(between sections)"
}

// functions finds the function at an address in the binary's pclntab,
// which a Go binary keeps even stripped.
type functions struct{ table *gosym.Table }

func codeSymbols(f *elf.File) (functions, error) {
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return functions{}, fmt.Errorf("no .gopclntab or .text: not a Go binary")
	}
	data, err := pcln.Data()
	if err != nil {
		return functions{}, err
	}
	table, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	return functions{table}, err
}

// packageAt is the package of the function at addr.
func (fs functions) packageAt(addr uint64) string {
	fn := fs.table.PCToFunc(addr)
	if fn == nil {
		return "(no function)"
	}
	if p := fn.PackageName(); p != "" {
		return p
	}
	return fn.Name
}

// module is the module-like prefix a package is counted under: three
// elements for a domain's path, the first for the standard library.
func module(pkg string) string {
	parts := strings.Split(pkg, "/")
	if !strings.Contains(parts[0], ".") {
		return parts[0]
	}
	return strings.Join(parts[:min(3, len(parts))], "/")
}

func mib(pages int) string { return fmt.Sprintf("%6.1f MiB", float64(pages*pageSize)/(1<<20)) }

func (r *report) print(w io.Writer, top int) {
	fmt.Fprintf(w, "%s: %s resident\n", filepath.Base(r.binary), mib(r.pages))
	for _, s := range sortedByCount(r.sections) {
		fmt.Fprintf(w, "  %-24s %s\n", s, mib(r.sections[s]))
	}
	modules := map[string]int{}
	for p, n := range r.packages {
		modules[module(p)] += n
	}
	fmt.Fprintf(w, ".text by module (the first %d):\n", top)
	for i, m := range sortedByCount(modules) {
		if i == top {
			break
		}
		fmt.Fprintf(w, "  %-48s %s\n", m, mib(modules[m]))
	}
}

func sortedByCount(counts map[string]int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	return keys
}
