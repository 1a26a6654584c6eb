// Package ha lets replicas of the daemon share its virtual nodes. Each node
// is held through a Lease of its own (HolderLeaseName) by client-go's
// leaderelection, and served only while held; each replica announces itself
// with a membership Lease (Members), and tries to hold only the nodes whose
// preferred replica it is in an assignment of the nodes to the live
// replicas (Assign: rendezvous hashing, bounded to an even share each), so
// the nodes spread evenly and a dead replica's nodes go to the next replica
// in each node's order. The node set may change while the replicas run
// (Members.AddNode and RemoveNode, for Nodes that others create): each
// node added gets a Hold of its own, ended when it leaves.
//
// A replica that stops renewing a node's lease stops serving it before the
// lease can expire for the others: the Fence of a holding ends RenewDeadline
// after the start of its last successful renewal, cancels the node's
// context then, and refuses, synchronously, every API request made with
// that context (FencedTransport) and every provider call that changes what
// the backend runs (Fence.Guard), so even a process resumed after a pause
// writes nothing, to the API server or the backend, for a node it no
// longer holds.
package ha
