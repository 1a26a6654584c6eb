package main

import (
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// promFamily reads values out of a parsed metric family; a nil one reads as
// empty.
type promFamily struct{ *dto.MetricFamily }

func labels(pairs []*dto.LabelPair) map[string]string {
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		out[p.GetName()] = p.GetValue()
	}
	return out
}

func (f *promFamily) matching(sel map[string]string) []*dto.Metric {
	if f == nil || f.MetricFamily == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		l := labels(m.GetLabel())
		ok := true
		for k, v := range sel {
			ok = ok && l[k] == v
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// value sums the counters or gauges matching sel.
func (f *promFamily) value(sel map[string]string) float64 {
	var v float64
	for _, m := range f.matching(sel) {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return v
}

func (f *promFamily) histCount(sel map[string]string) float64 {
	var v float64
	for _, m := range f.matching(sel) {
		v += float64(m.GetHistogram().GetSampleCount())
	}
	return v
}

func (f *promFamily) histSum(sel map[string]string) float64 {
	var v float64
	for _, m := range f.matching(sel) {
		v += m.GetHistogram().GetSampleSum()
	}
	return v
}

// sumBy sums the counters matching sel by the values of the given labels,
// keyed "v1 v2"; for a histogram, its sample counts.
func (f *promFamily) sumBy(sel map[string]string, keys ...string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.matching(sel) {
		l := labels(m.GetLabel())
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = l[k]
		}
		out[strings.Join(parts, " ")] += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
	}
	return out
}
