package podenv

import (
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

var everything = labels.Everything()

// Expand replaces $(NAME) references in s with the value lookup gives, as the
// kubelet does for env values, command and args:
//
//   - $(NAME) becomes the value of NAME, or stays as written if NAME is not defined;
//   - $$ becomes $, so $$(NAME) is the literal $(NAME);
//   - any other $, and an unterminated $(, stay as written.
func Expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
	}
	return b.String()
}
