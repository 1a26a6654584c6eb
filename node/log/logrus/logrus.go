// Package logrus is the log package's Logger for a logrus entry, under the
// prior virtual-kubelet project's name for it. log.L already writes to
// logrus' standard logger; use FromLogrus for another logger or an entry
// with fields:
//
//	log.L = vklogrus.FromLogrus(logrus.NewEntry(myLogger))
package logrus

import (
	"github.com/sirupsen/logrus"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// FromLogrus returns a Logger writing to entry, with its fields.
func FromLogrus(entry *logrus.Entry) log.Logger { return log.FromLogrus(entry) }
