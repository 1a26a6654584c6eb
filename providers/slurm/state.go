package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

// record is what the daemon keeps of each pod's job in its state
// directory, which only it can read or write: the job ID sbatch returned,
// the uid of the tenant it was submitted as, and the pod. A restarted
// daemon adopts jobs from these records, never from what a job's comment
// or the tenant-owned pod directory say.
type record struct {
	JobID string `json:"jobID"`
	// TenantUID is the user the job was submitted as: the pod keeps that
	// tenant when its namespace maps to another since. 0 in records of
	// daemons that did not write it.
	TenantUID uint32      `json:"tenantUID,omitempty"`
	Pod       *corev1.Pod `json:"pod"`
}

// podUID is what a pod UID must look like to name a file or directory.
var podUID = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9]{0,62}$`)

func (p *Provider) recordPath(uid types.UID) string {
	return filepath.Join(p.cfg.StateDir, string(uid)+".json")
}

// saveRecord writes the pod's record once sbatch has returned its job ID.
func (p *Provider) saveRecord(pod *corev1.Pod, t *tenant, jobID string) error {
	data, err := json.Marshal(record{JobID: jobID, TenantUID: t.uid, Pod: pod})
	if err != nil {
		return err
	}
	return writeAtomic(p.recordPath(pod.UID), data, 0o600)
}

func (p *Provider) removeRecord(uid types.UID) {
	if podUID.MatchString(string(uid)) {
		_ = os.Remove(p.recordPath(uid))
	}
}

// records reads every record in the state directory; one that does not
// parse or whose pod is not the file's is logged and skipped.
func (p *Provider) records(ctx context.Context) ([]record, error) {
	entries, err := os.ReadDir(p.cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("stateDir: %v", err)
	}
	var out []record
	for _, e := range entries {
		uid, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() || !podUID.MatchString(uid) {
			continue
		}
		data, err := sandbox.ReadRegular(filepath.Join(p.cfg.StateDir, e.Name()), maxRecordBytes)
		var r record
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err == nil && (r.Pod == nil || string(r.Pod.UID) != uid || r.JobID == "") {
			err = fmt.Errorf("it is not pod %s's record", uid)
		}
		if err != nil {
			log.G(ctx).WithError(err).Warnf("state record %s skipped", e.Name())
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// maxRecordBytes bounds a record: a pod object is at most about 1.5 MB.
const maxRecordBytes = 4 << 20
