// Package node is the library a virtual-kubelet provider is built on. It
// turns a provider, anything that can run pods, into a Kubernetes node:
//
//   - NodeController registers the Node, keeps it fresh with a
//     coordination.k8s.io/v1 Lease and periodic status updates, and pushes
//     the status changes its NodeProvider reports.
//   - PodController watches the pods bound to the node, hands them to a
//     PodLifecycleHandler (create, update, delete), and writes the status
//     the provider reports back to the API server.
//
// The pod controller has four work queues, each holding a pod key in one
// worker at a time:
//
//	pod informer, provider resync ──> sync queue ───> provider Create/Update/DeletePod
//	                                     │             (SetPodVolumes first)
//	                                     v
//	provider NotifyPods (or polling) ─> status queue ─> pods/status patch; a deleting
//	probe results                        ^              pod whose status is terminal
//	                                     │              is then removed (grace 0)
//	DeletePodsFromKubernetesEnqueue ──> delete queue
//	ConfigMap/Secret changes, ───────> volume queue ─> provider SetPodVolumes
//	token renewals
//
// A pod object is removed in one place, the status sync that writes its
// terminal status, as the kubelet's status manager does; the delete queue
// hands it the pods to remove. What the controller keeps per pod (its
// record, IPs, volumes, probes) is each kept by one owner, told through one
// hook when the pod finishes, is replaced by another of its name, or is
// gone.
//
// A provider implements Provider: the pod lifecycle (PodLifecycleHandler)
// and the node it runs pods on. It implements PodNotifier to report pod
// status as it changes (one that does not is polled), NodeProvider to report
// its health and node changes, and any of the optional capabilities listed
// with Provider (logs, exec, attach, port-forward, stats, volumes, ...).
// CapabilitiesOf finds them once, into the Capabilities that the pod
// controller, the node controller (Capabilities.NodeProviderFor) and the
// kubelet API routes (Capabilities.PodHandlerConfig) all receive; a
// capability the provider lacks, or as a CapabilityDeclarer does not
// declare, costs nothing. Errors a provider returns should use
// the kinds in package errdefs: GetPod and GetPodStatus returning
// errdefs.NotFound tell the controller a pod is gone.
//
// Provider calls are retried until they succeed or fail with
// errdefs.InvalidInput; a deleted pod whose stop the provider has not
// reported by the end of its grace period plus GracePeriodMargin is finished
// by the controller; after a restart, pods the provider still has (GetPod)
// are adopted. A pod the provider lost (after a restart, or while running)
// is created again with its restarts counted, as a kubelet restarts lost
// containers, unless its restart policy is Never, or OnFailure and its
// containers had exited 0: then it is marked Failed.
//
// Pod IPs are known before a pod starts, so status.podIP(s) in its
// environment resolve: a provider that implements PodIPAssigner chooses
// them, else they come from the node's spec.podCIDRs
// (PodControllerConfig.PodCIDRs), and CreatePod gets them in the pod's
// status.
//
// Probes are the provider's to run unless it implements ProbeDelegator (and,
// a CapabilityDeclarer, declares CapabilityProbes, as a plugin does): then
// the controller runs them as a kubelet does (exec probes through the
// provider's exec, network ones when the pod IPs are reachable), sets the
// containers' ready and started from them, and stops a container whose
// liveness or startup probe failed through ContainerKiller.
//
// What a provider runs, as a kubelet would:
//
//   - Environment: env and envFrom arrive resolved (ConfigMaps, Secrets,
//     the downward API, service links).
//   - Volumes: a provider with the volumes capability (PodVolumeHandler)
//     gets the files of the pod's configMap, secret, downwardAPI and
//     projected volumes, service-account tokens included (TokenRequest,
//     bound to the pod), before CreatePod and whenever they change; package
//     node/volume resolves them. Other volume kinds (emptyDir,
//     persistentVolumeClaim, hostPath, image, csi, ...) are left in the spec
//     for the provider.
//   - Devices: a provider with devices (DeviceProvider) has them published
//     as the node's ResourceSlices (nodeutil.DevicePublisher); a pod with
//     ResourceClaims is created once each is allocated on the node and
//     reserved for it, after PrepareDevices got its devices per container.
//   - Init containers run one at a time, in spec order, each to successful
//     completion before the next starts, and all before the app containers;
//     a failed one is restarted unless restartPolicy is Never, in which case
//     the pod fails. Sidecars (init containers with restartPolicy Always)
//     are started in their turn and keep running alongside the app
//     containers. While they run the phase is Pending and
//     initContainerStatuses tell how far the pod got.
//   - Ephemeral containers (kubectl debug) arrive through UpdatePod, added
//     to spec.ephemeralContainers; the provider starts them, never restarts
//     them, reports ephemeralContainerStatuses, and accepts exec and attach
//     to them.
//
// The pod conditions PodReadyToStartContainers, Initialized,
// ContainersReady and Ready (readiness gates honoured) are computed from the
// container statuses, as the kubelet does, when the provider's status leaves
// them out; their transition times move only when they change.
//
// Both controllers are started with Run, which blocks until its context ends,
// or with Start, which returns at once (the pod controller's once its caches
// are synced): between their work they hold no goroutine, so a process can
// run a thousand idle nodes. Ready is closed once a controller is up, and
// Done and Err tell how it ended.
// The kubelet HTTP API (logs, exec, port-forward, stats) lives in package
// node/api.
//
// Spans are recorded through package node/trace (OpenCensus by default)
// around every queue item and provider call, and the logger in the context
// (package node/log, logrus by default) gets node and pod fields; both reach
// the provider through the context it is called with.
package node
