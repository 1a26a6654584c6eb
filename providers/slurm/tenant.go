package slurm

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// Tenant maps Kubernetes namespaces to one Unix user: the pods of those
// namespaces run as jobs that user submits, and may ask of Slurm only what
// Allow lists. A pod can do what the user could do with sbatch by hand.
type Tenant struct {
	// Namespaces are the namespaces whose pods run as User.
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceSelector maps as well every namespace whose labels it
	// matches (a Kubernetes label selector): labels only those who may
	// update Namespace objects can set. A namespace some tenant names in
	// Namespaces maps by its name, whatever its labels; one that the
	// selectors of two tenants match is refused, naming both.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// User is the Unix user (name or uid) the jobs run as; never root.
	User string `json:"user"`
	// Group is the job's group (name or gid); default the user's primary
	// group.
	Group string `json:"group,omitempty"`
	// Account is sbatch --account; default the config's account.
	Account string `json:"account,omitempty"`
	Allow
}

// Allow is what pods may ask of Slurm through their
// slurm.virtual-kubelet.io/sbatch-* annotations.
type Allow struct {
	// Partitions are the partitions pods may name; the first is the
	// default.
	Partitions []string `json:"partitions,omitempty"`
	// QOS are the qualities of service pods may name; the first is the
	// default.
	QOS []string `json:"qos,omitempty"`
	// Annotations are the plain options pods may set (constraint,
	// exclusive, mail-type, nice, time-min); nil means
	// DefaultAnnotations. partition, qos, reservation and licenses are
	// governed by their lists instead.
	Annotations []string `json:"annotations,omitempty"`
	// Reservations are the reservations pods may name.
	Reservations []string `json:"reservations,omitempty"`
	// Licenses are the licenses pods may ask for.
	Licenses []string `json:"licenses,omitempty"`
}

// DefaultAnnotations are the options pods may set when Allow.Annotations
// is not given: those that take nothing from other users.
var DefaultAnnotations = []string{"constraint", "mail-type", "nice", "time-min"}

// plainOptions are the options Allow.Annotations may list; the others
// (--uid, --chdir, --output, --wrap, ...) would let a pod author step
// outside what the node's config allows.
var plainOptions = []string{"constraint", "exclusive", "mail-type", "nice", "time-min"}

// SbatchOptions are every option a pod's annotations may name, when its
// tenant allows it.
var SbatchOptions = append([]string{"licenses", "partition", "qos", "reservation"}, plainOptions...)

// maxNice is the largest nice value Slurm takes (NICE_OFFSET - 3).
const maxNice = 2147483645

// tenant is a Tenant resolved to Unix ids.
type tenant struct {
	// name says which tenant of the config this is, in messages:
	// tenants[1] (user bob).
	name string
	// selector is the NamespaceSelector; nil when the tenant maps
	// namespaces by name only.
	selector  labels.Selector
	user      string
	uid, gid  uint32
	account   string
	partition string
	qos       string
	allow     Allow
	// cred runs the Slurm commands of the tenant's jobs as its user; nil
	// when that is the daemon's own.
	cred *syscall.Credential
}

// slurmName checks a value the config passes to Slurm as one option.
func slurmName(field, v string) error {
	if strings.ContainsAny(v, " \t\n,=") || strings.HasPrefix(v, "-") {
		return fmt.Errorf("%s: %q is not a Slurm name (no blanks, commas, '=' or leading '-')", field, v)
	}
	return nil
}

func (a *Allow) validate(field string) error {
	for _, list := range []struct {
		name   string
		values []string
	}{{"partitions", a.Partitions}, {"qos", a.QOS}, {"reservations", a.Reservations}, {"licenses", a.Licenses}} {
		for i, v := range list.values {
			if err := slurmName(fmt.Sprintf("%s%s[%d]", field, list.name, i), v); err != nil {
				return err
			}
		}
	}
	if a.Annotations == nil {
		a.Annotations = DefaultAnnotations
	}
	for i, name := range a.Annotations {
		if !slices.Contains(plainOptions, name) {
			return fmt.Errorf("%sannotations[%d]: %q is not one of %s (partition, qos, reservation and licenses are allowed by their own lists)", field, i, name, strings.Join(plainOptions, ", "))
		}
	}
	return nil
}

// resolveTenants looks up each tenant's user and group and indexes the
// tenants by namespace name, and those that select namespaces by label in
// order. No tenant may resolve to root, however it maps namespaces.
func (c *Config) resolveTenants() error {
	c.tenants = map[string]*tenant{}
	c.bySelector, c.resolved = nil, nil
	for i := range c.Tenants {
		t := &c.Tenants[i]
		field := fmt.Sprintf("tenants[%d].", i)
		if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
			return fmt.Errorf("%snamespaces: name at least one namespace, or set namespaceSelector", field)
		}
		if t.User == "" {
			return fmt.Errorf("%suser: the Unix user the namespaces' jobs run as is required", field)
		}
		if err := slurmName(field+"account", t.Account); err != nil {
			return err
		}
		if err := t.Allow.validate(field); err != nil {
			return err
		}
		var selector labels.Selector
		if t.NamespaceSelector != nil {
			if len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
				return fmt.Errorf("%snamespaceSelector: an empty selector matches every namespace (kube-system too): give matchLabels or matchExpressions", field)
			}
			var err error
			if selector, err = metav1.LabelSelectorAsSelector(t.NamespaceSelector); err != nil {
				return fmt.Errorf("%snamespaceSelector: %v", field, err)
			}
		}
		uid, gid, err := lookupUser(t.User)
		if err != nil {
			return fmt.Errorf("%suser: %v", field, err)
		}
		if t.Group != "" {
			if gid, err = lookupGroup(t.Group); err != nil {
				return fmt.Errorf("%sgroup: %v", field, err)
			}
		}
		if uid == 0 {
			return fmt.Errorf("%suser: %q is root (uid 0): a tenant's jobs never run as root", field, t.User)
		}
		if gid == 0 {
			return fmt.Errorf("%sgroup: the group of %q is root (gid 0): a tenant's jobs never run as root's group", field, t.User)
		}
		rt := &tenant{name: fmt.Sprintf("tenants[%d] (user %s)", i, t.User), selector: selector,
			user: t.User, uid: uid, gid: gid, account: cmp.Or(t.Account, c.Account), allow: t.Allow,
			partition: first(t.Partitions, c.Partition), qos: first(t.QOS, c.QOS),
			cred: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{gid}}}
		for _, ns := range t.Namespaces {
			if _, dup := c.tenants[ns]; dup {
				return fmt.Errorf("%snamespaces: namespace %q is mapped to two tenants", field, ns)
			}
			c.tenants[ns] = rt
		}
		if selector != nil {
			c.bySelector = append(c.bySelector, rt)
		}
		c.resolved = append(c.resolved, rt)
	}
	return nil
}

// checkPrivileges refuses what a daemon running as euid cannot do safely:
// as root it needs tenants, or every pod author would get root on the
// compute nodes; as another user it can submit jobs only as itself.
func (c *Config) checkPrivileges(euid int) error {
	if euid == 0 && len(c.Tenants) == 0 {
		return errors.New("tenants: the daemon runs as root, so jobs would run as root: map namespaces to non-root users (tenants), or run the daemon as the user the jobs should run as")
	}
	if euid != 0 {
		for i, t := range c.Tenants {
			if uid, _, _ := lookupUser(t.User); int(uid) != euid {
				return fmt.Errorf("tenants[%d].user: submitting jobs as %q needs the daemon to run as root (it runs as uid %d)", i, t.User, euid)
			}
		}
	}
	return nil
}

// selectsByLabel reports whether some tenant maps namespaces by their
// labels, which the daemon then watches.
func (c *Config) selectsByLabel() bool { return len(c.bySelector) > 0 }

// tenantOf is the tenant of a namespace's pods: the tenant that names the
// namespace, else the one whose namespaceSelector matches the namespace's
// labels; or an InvalidInput error (ProviderRejected) naming a namespace no
// tenant maps, or the two tenants whose selectors both match it.
func (c *Config) tenantOf(namespace string, nsLabels map[string]string) (*tenant, error) {
	if len(c.Tenants) == 0 {
		return &tenant{name: "the daemon's user", user: "the daemon's user", uid: uint32(os.Geteuid()), gid: uint32(os.Getegid()), account: c.Account,
			partition: first(c.Allow.Partitions, c.Partition), qos: first(c.Allow.QOS, c.QOS), allow: c.Allow}, nil
	}
	if t, ok := c.tenants[namespace]; ok {
		return t, nil
	}
	var found *tenant
	for _, t := range c.bySelector {
		if !t.selector.Matches(labels.Set(nsLabels)) {
			continue
		}
		if found != nil {
			return nil, errdefs.InvalidInputf("namespace %q: its labels match the namespaceSelector of both %s and %s: its pods cannot run here until they match one", namespace, found.name, t.name)
		}
		found = t
	}
	if found != nil {
		return found, nil
	}
	return nil, errdefs.InvalidInputf("namespace %q is mapped to no tenant of this Slurm node: its pods cannot run here", namespace)
}

// tenantWithUID is a configured tenant whose user is uid, for a job
// submitted as that user before its namespace was mapped to another; nil
// when there is none.
func (c *Config) tenantWithUID(uid uint32) *tenant {
	for _, t := range c.resolved {
		if t.uid == uid {
			return t
		}
	}
	return nil
}

// option checks one sbatch-NAME annotation against the tenant's Allow and
// returns the sbatch argument it becomes.
func (t *tenant) option(key, name, v string) (string, error) {
	a := &t.allow
	refuse := func(why string, args ...any) (string, error) {
		return "", errdefs.InvalidInputf("annotation %s: "+why, append([]any{key}, args...)...)
	}
	if strings.ContainsAny(v, "\n\r\x00") {
		return refuse("the value must be one line")
	}
	switch name {
	case "partition", "qos", "reservation":
		list := map[string][]string{"partition": a.Partitions, "qos": a.QOS, "reservation": a.Reservations}[name]
		if !slices.Contains(list, v) {
			return refuse("%s %q is not one this namespace may use (allowed: %s)", name, v, strings.Join(list, ", "))
		}
	case "licenses":
		for _, item := range strings.Split(v, ",") {
			lic, count, counted := strings.Cut(item, ":")
			if !slices.Contains(a.Licenses, lic) {
				return refuse("license %q is not one this namespace may use (allowed: %s)", lic, strings.Join(a.Licenses, ", "))
			}
			if n, err := strconv.Atoi(count); counted && (err != nil || n < 1) {
				return refuse("license count %q must be a positive number", count)
			}
		}
	default:
		if !slices.Contains(plainOptions, name) {
			return refuse("sbatch option %q is not allowed (allowed: %s)", name, strings.Join(SbatchOptions, ", "))
		}
		if !slices.Contains(a.Annotations, name) {
			return refuse("sbatch option %q is not allowed for this namespace (allowed: %s)", name, strings.Join(a.Annotations, ", "))
		}
		switch name {
		case "nice":
			// A negative nice raises a job above others: Slurm leaves that
			// to its administrators, and jobs submitted for a pod are not.
			if n, err := strconv.Atoi(v); err != nil || n < 0 || n > maxNice {
				return refuse("nice must be a whole number from 0 to %d, got %q", maxNice, v)
			}
		case "exclusive":
			if v != "" && v != "user" && v != "mcs" {
				return refuse("exclusive takes no value, user or mcs, got %q", v)
			}
		}
	}
	if v == "" {
		return "--" + name, nil
	}
	return "--" + name + "=" + v, nil
}

// lookupUser resolves a user name or uid to its uid and primary gid.
func lookupUser(name string) (uid, gid uint32, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return 0, 0, fmt.Errorf("no Unix user %q on this host", name)
		}
	}
	id, err1 := strconv.ParseUint(u.Uid, 10, 32)
	g, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("user %q has no numeric ids (%s:%s)", name, u.Uid, u.Gid)
	}
	return uint32(id), uint32(g), nil
}

// lookupGroup resolves a group name or gid.
func lookupGroup(name string) (uint32, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		if g, err = user.LookupGroupId(name); err != nil {
			return 0, fmt.Errorf("no Unix group %q on this host", name)
		}
	}
	id, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("group %q has no numeric id (%s)", name, g.Gid)
	}
	return uint32(id), nil
}

func first(list []string, fallback string) string {
	if len(list) > 0 {
		return list[0]
	}
	return fallback
}
