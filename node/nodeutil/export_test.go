package nodeutil

import "context"

// ServeWith has n run serve as its kubelet API server, for tests of what
// its end does to the node.
func ServeWith(n *Node, serve func(context.Context) error) { n.serve = serve }
