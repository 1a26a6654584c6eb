// Package wire is what both ends of the provider plugin contract
// (plugin/providerv1alpha1) agree on besides the generated code: the
// protocol version, the Kubernetes protobuf encoding of the objects that
// travel as bytes, and errdefs kinds as gRPC status codes.
package wire

// ProtocolVersion is the version of the contract in package
// providerv1alpha1; the handshake refuses any other.
const ProtocolVersion = 1

// OpenedHeader is the header a plugin sends on a stream (logs) once the
// provider accepted it, before any data.
const OpenedHeader = "vk-stream-opened"
