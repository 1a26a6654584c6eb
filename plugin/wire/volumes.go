package wire

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/volume"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
)

// VolumesToProto is the SetPodVolumes request for pod and its contents.
func VolumesToProto(pod *corev1.Pod, contents *volume.Contents) (*pb.SetPodVolumesRequest, error) {
	data, err := Encode(pod)
	if err != nil {
		return nil, err
	}
	req := &pb.SetPodVolumesRequest{Pod: data, Sources: contents.Sources}
	if !contents.RefreshAt.IsZero() {
		req.RefreshAtUnixNano = contents.RefreshAt.UnixNano()
	}
	for _, v := range contents.Volumes {
		pv := &pb.Volume{Name: v.Name, Files: make([]*pb.File, 0, len(v.Files))}
		for _, f := range v.Files {
			if f.Token != nil {
				// Its Read cannot cross the process boundary; a plugin
				// gets its tokens in Data (its provider is no
				// TokenOnReadHandler).
				return nil, fmt.Errorf("volume %q: file %q is a token to request on read, which a plugin cannot do", v.Name, f.Path)
			}
			pv.Files = append(pv.Files, &pb.File{Path: f.Path, Data: []byte(f.Data), Mode: f.Mode})
		}
		req.Volumes = append(req.Volumes, pv)
	}
	return req, nil
}

// VolumesFromProto is the inverse of VolumesToProto for the contents; the
// files keep their order (sorted by path, as the daemon sends them).
func VolumesFromProto(req *pb.SetPodVolumesRequest) *volume.Contents {
	contents := &volume.Contents{Sources: req.GetSources()}
	if at := req.GetRefreshAtUnixNano(); at != 0 {
		contents.RefreshAt = time.Unix(0, at)
	}
	for _, v := range req.GetVolumes() {
		vol := volume.Volume{Name: v.GetName(), Files: make([]volume.File, 0, len(v.GetFiles()))}
		for _, f := range v.GetFiles() {
			vol.Files = append(vol.Files, volume.File{Path: f.GetPath(), Data: string(f.GetData()), Mode: f.GetMode()})
		}
		contents.Volumes = append(contents.Volumes, vol)
	}
	return contents
}
