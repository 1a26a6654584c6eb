package mock

import (
	"bufio"
	"fmt"
	"path"
	"strings"
)

// isShell reports whether a container's process is an interactive shell:
// an ephemeral container without a command (kubectl debug --image=busybox
// starts the image's shell), or one whose command is just a shell.
func isShell(c *containerState) bool {
	cmd := append(append([]string(nil), c.spec.command...), c.spec.args...)
	if len(cmd) == 0 {
		return c.ephemeral
	}
	switch path.Base(cmd[0]) {
	case "sh", "bash", "ash":
		return len(cmd) == 1
	}
	return false
}

// runShell is an attached interactive shell: each line of stdin runs as a
// built-in command script (see RunInContainer), with a prompt on a TTY.
// On "exit" the shell, and its container, exit; at the end of the input
// only the session ends, and the shell can be attached to again (the
// container keeps its stdin open, as without stdinOnce).
func (p *Provider) runShell(namespace, podName, containerName string, s *session) {
	prompt := func() {
		if s.tty {
			fmt.Fprint(s.stdout, "/ # ")
		}
	}
	prompt()
	sc := bufio.NewScanner(s.stdin)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if words := strings.Fields(line); len(words) > 0 && words[0] == "exit" {
			p.shellExited(namespace, podName, containerName, exitArg(words[1:], s.stderr))
			return
		}
		s.script(line)
		prompt()
	}
}

// shellExited ends a container whose shell exited.
func (p *Provider) shellExited(namespace, podName, containerName string, code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, c, err := p.lookup(namespace, podName, containerName)
	if err != nil || c.status.State.Running == nil {
		return
	}
	c.stopTimer()
	ps.exit(c, int32(code))
	p.changed(ps)
}
