package api

import (
	"net/http"
	"strconv"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// PodStatsSummaryHandler returns a handler that serves GET /stats/summary
// from f and 404 for any other path.
func PodStatsSummaryHandler(f PodStatsSummaryHandlerFunc) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /stats/summary", HandlePodStatsSummary(f))
	return mux
}

// HandlePodStatsSummary returns the handler of /stats/summary: h's summary
// as JSON, or with ?only_cpu_and_memory=true only its CPU and memory
// figures, as the kubelet does for the metrics pipeline. An error of h
// answers with its status (see the package doc); a nil h answers 501.
func HandlePodStatsSummary(h PodStatsSummaryHandlerFunc) http.HandlerFunc {
	if h == nil {
		return func(w http.ResponseWriter, _ *http.Request) { notImplemented(w, "stats summary") }
	}
	return func(w http.ResponseWriter, r *http.Request) {
		onlyCPUAndMemory := false
		if v := r.URL.Query().Get("only_cpu_and_memory"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				writeError(r.Context(), w, errdefs.InvalidInputf("only_cpu_and_memory: %q is not a boolean", v))
				return
			}
			onlyCPUAndMemory = b
		}
		summary, err := h(r.Context())
		if err != nil {
			writeError(r.Context(), w, err)
			return
		}
		if summary == nil {
			summary = &statsv1alpha1.Summary{}
		}
		if onlyCPUAndMemory {
			summary = cpuAndMemory(summary)
		}
		writeJSON(r.Context(), w, summary)
	}
}

// cpuAndMemory returns a copy of s with only names, start times, CPU and
// memory.
func cpuAndMemory(s *statsv1alpha1.Summary) *statsv1alpha1.Summary {
	containers := func(cs []statsv1alpha1.ContainerStats) []statsv1alpha1.ContainerStats {
		if cs == nil {
			return nil
		}
		out := make([]statsv1alpha1.ContainerStats, 0, len(cs))
		for _, c := range cs {
			out = append(out, statsv1alpha1.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory})
		}
		return out
	}
	out := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{
			NodeName:         s.Node.NodeName,
			SystemContainers: containers(s.Node.SystemContainers),
			StartTime:        s.Node.StartTime,
			CPU:              s.Node.CPU,
			Memory:           s.Node.Memory,
		},
	}
	if s.Pods != nil {
		out.Pods = make([]statsv1alpha1.PodStats, 0, len(s.Pods))
	}
	for _, p := range s.Pods {
		out.Pods = append(out.Pods, statsv1alpha1.PodStats{
			PodRef:     p.PodRef,
			StartTime:  p.StartTime,
			Containers: containers(p.Containers),
			CPU:        p.CPU,
			Memory:     p.Memory,
		})
	}
	return out
}
