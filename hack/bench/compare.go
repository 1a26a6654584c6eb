package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// namedBinary is one of -compare-binaries: a daemon binary and the name its
// rows carry.
type namedBinary struct{ name, path string }

// parseBinaries reads -compare-binaries: name=path pairs, comma-separated.
func parseBinaries(s string) ([]namedBinary, error) {
	var out []namedBinary
	seen := map[string]bool{}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, path, ok := strings.Cut(pair, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("-compare-binaries: %q is not name=path", pair)
		}
		if seen[name] {
			return nil, fmt.Errorf("-compare-binaries: %q is named twice", name)
		}
		if fi, err := os.Stat(path); err != nil || fi.IsDir() {
			return nil, fmt.Errorf("-compare-binaries: %s: %s is not a binary", name, path)
		}
		seen[name] = true
		out = append(out, namedBinary{name, path})
	}
	return out, nil
}

// comparedPass is the daemon pass of one of -compare-binaries, against the
// same floor (and kwok) as the run's own daemon pass.
type comparedPass struct {
	Name       string
	Daemon     *phaseResult
	Usage      processUsage
	NodesReady time.Duration
}

// comparedPasses are the daemon passes of -compare-binaries, one per
// binary, each by daemonPass with the binary swapped.
func comparedPasses(ctx context.Context, c config, a, b *cluster, r *result) []func() error {
	var passes []func() error
	for _, bin := range c.compare {
		passes = append(passes, func() error {
			cc := c
			cc.binary, cc.plugin, cc.steady = bin.path, false, 0
			cr := &result{N: r.N, Nodes: r.Nodes}
			if err := daemonPass(ctx, cc, a, b, cr); err != nil {
				return fmt.Errorf("%s: %w", bin.name, err)
			}
			logf("N=%d %s: all Running in %s, all gone in %s", r.N, bin.name,
				cr.Daemon.AllRunning.Round(time.Millisecond), cr.Daemon.AllGone.Round(time.Millisecond))
			r.Compared = append(r.Compared, comparedPass{Name: bin.name, Daemon: cr.Daemon, Usage: cr.Usage, NodesReady: cr.NodesReady})
			return nil
		})
	}
	return passes
}

// comparedTable gives each binary's figures beside the run's own daemon's
// ("-binary"), as ratios to the same floor, and the medians over runs.
func comparedTable(b *strings.Builder, results []*result) {
	type figures struct{ running, gone, rss []float64 }
	var names []string
	byName := map[string]*figures{}
	add := func(name string, r *result, d *phaseResult, u processUsage) {
		f := byName[name]
		if f == nil {
			f = &figures{}
			byName[name] = f
			names = append(names, name)
		}
		fr, fg := r.floor()
		f.running = append(f.running, ratio(d.AllRunning, fr))
		f.gone = append(f.gone, ratio(d.AllGone, fg))
		f.rss = append(f.rss, float64(u.PeakRSS)/(1<<20))
	}
	var rows [][]string
	for _, r := range results {
		if len(r.Compared) == 0 {
			continue
		}
		fr, fg := r.floor()
		own := comparedPass{Name: "-binary", Daemon: r.Daemon, Usage: r.Usage, NodesReady: r.NodesReady}
		for _, p := range append([]comparedPass{own}, r.Compared...) {
			add(p.Name, r, p.Daemon, p.Usage)
			rows = append(rows, cells("%s|%s|%s (%.2fx)|%s (%.2fx)|%s|%.2f|%.0f MiB", r.size(), p.Name,
				ms(p.Daemon.AllRunning), ratio(p.Daemon.AllRunning, fr), ms(p.Daemon.AllGone), ratio(p.Daemon.AllGone, fg),
				ms(p.NodesReady), perThousand(p.Usage.CPU, r.N), float64(p.Usage.PeakRSS)/(1<<20)))
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n")
	writeTable(b, "N|binary|all Running (÷ floor)|all gone (÷ floor)|nodes Ready|CPU s per 1,000 pods|peak RSS", rows)
	var medians [][]string
	for _, name := range names {
		f := byName[name]
		medians = append(medians, cells("%s|%d|**%.2fx**|**%.2fx**|**%.0f MiB**", name, len(f.running), median(f.running), median(f.gone), median(f.rss)))
	}
	b.WriteString("\n")
	writeTable(b, "binary|runs|median all Running ÷ floor|median all gone ÷ floor|median peak RSS", medians)
}
