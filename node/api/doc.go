// Package api serves the kubelet's HTTP API over a provider's handler
// functions, so that kubectl logs, exec, attach and port-forward, the
// metrics-server and anything else that reaches a node through the
// apiserver's nodes/proxy and pods/* subresources work against a virtual
// node.
//
// # Routes
//
// A PodHandlerConfig holds the provider's functions (see types.go for
// their contract). PodHandler returns a handler with every route;
// AttachPodRoutes registers them on a mux of the caller's, next to routes
// of its own:
//
//	mux := http.NewServeMux()
//	api.AttachPodRoutes(api.PodHandlerConfig{
//		RunInContainer:    p.RunInContainer,
//		AttachToContainer: p.AttachToContainer,
//		GetContainerLogs:  p.GetContainerLogs,
//		GetPods:           p.GetPods,
//		GetPod:            p.GetPod,
//		GetStatsSummary:   p.GetStatsSummary,
//		PortForward:       p.PortForward,
//	}, mux, false)
//
// The routes are those of the kubelet: /containerLogs, /exec, /attach,
// /portForward, /pods, /stats/summary, /metrics/resource and /healthz, and
// with debug true /runningpods/. The Handle* functions serve one route
// each, for a mux built by hand. A route whose function is nil answers 501
// Not Implemented. /metrics/resource, which metrics-server scrapes for
// `kubectl top` and the HorizontalPodAutoscaler, is written from the stats
// summary in the kubelet's format, one sample at a time; a provider with
// metric families of its own sets GetMetricsResource instead. An
// error of kind errdefs.NotFound answers 404, errdefs.InvalidInput 400,
// errdefs.NotImplemented 501.
//
// Exec and attach speak the remotecommand protocols v1 to v4 over SPDY and
// v1 to v5 over WebSocket; port-forward speaks SPDY, WebSocket, and SPDY
// tunneled through a WebSocket. A command's exit code reaches the client
// when the exec function returns an error implementing
// k8s.io/utils/exec.ExitError. The apiserver turns WebSocket clients into
// SPDY for the node unless the Node lists ExtendWebSocketsToKubelet in
// status.declaredFeatures (Kubernetes 1.36 and later): both ways work here.
//
// # Authentication and authorization
//
// The apiserver reaches the node with a client certificate, and users can
// call it directly with a bearer token; like the kubelet, the API should
// authenticate both and authorize every request with a SubjectAccessReview
// on the node's subresources (nodes/proxy, nodes/stats, nodes/metrics,
// nodes/log). NewAuth builds that from an AuthConfig, and WithAuth wraps a
// handler with it:
//
//	auth, err := api.NewAuth(ctx, api.AuthConfig{
//		ClientCAFile:              "/etc/kubernetes/pki/ca.crt",
//		TokenReviewClient:         client.AuthenticationV1(),
//		SubjectAccessReviewClient: client.AuthorizationV1(),
//		NodeName:                  nodeName,
//	})
//	if err != nil {
//		return err
//	}
//	srv := &http.Server{
//		Addr:    ":10250",
//		Handler: api.WithAuth(mux, auth),
//		// Ask for client certificates; NewAuth verifies them.
//		TLSConfig: &tls.Config{ClientAuth: tls.RequestClientCert},
//	}
//	return srv.ListenAndServeTLS(certFile, keyFile)
//
// Requests without valid credentials get 401, denied ones 403; /healthz is
// served to anyone.
//
// # Many nodes on one listener
//
// A NodeRouter serves the kubelet APIs of many nodes from one listener:
// each node's handler is registered by name, pod routes go to the pod's
// node and node routes are under NodeRoutesPrefix(name), which the Node
// announces to metrics-server in ResourceMetricsPathAnnotation. Each
// request is authorized for the node it goes to.
package api
