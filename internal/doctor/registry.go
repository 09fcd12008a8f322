package doctor

import (
	"fmt"
	"slices"
)

// Needs is what a check needs beyond a session on the server, as a set.
type Needs uint8

const (
	// NeedsHost: the check reads the host's /proc or /sys; it runs only
	// when the server is local or Options.Host is HostOn, and says "not
	// checked" otherwise.
	NeedsHost Needs = 1 << iota
	// NeedsSample: the check judges only a sample (Options.Sample > 0) and
	// says "not checked" without one; selecting it makes the doctor sample.
	NeedsSample
	// WantsSample: the check judges the current state without a sample,
	// but its main advice rests on one, so selecting it makes the doctor
	// sample as a NeedsSample check does. Other checks that read rates or
	// peaks use a sample only when one is taken anyway.
	WantsSample
)

// Has reports whether n holds every need of m.
func (n Needs) Has(m Needs) bool { return n&m == m }

// Report sections, in report order: a check's order is its section plus
// its place in the section (1-99).
const (
	secHost        = 100 // the host: THP, huge pages, overcommit, swap
	secSessions    = 200 // connections and sessions
	secMemory      = 300 // memory and temp files
	secCatalog     = 400 // catalogs, the xmin horizon and temp tables
	secWaits       = 500 // waits
	secStatements  = 600 // statements
	secMaintenance = 700 // vacuum and wraparound
	// secProfile holds the checks that read a CPU profile (Options.Profile):
	// they run only when one was asked for (profileSelection).
	secProfile = 800
	// secWindow holds the checks that judge a window of a run's results
	// (results_window.go): they run only under RunResults (doctor
	// --results), and only they run there.
	secWindow = 900
	secEnd    = 1000
)

// checks is every registered check in report order. register fills it from
// the init functions of the files that implement the checks; nothing
// changes it after.
var checks []Check

// register adds c to the checks; call it from an init function of the file
// that declares c's run function. It panics on a programming error, found
// by the first test of the package: an empty ID or title, a nil run, an
// order outside the sections, an ID or order registered twice.
func register(c Check) {
	if c.ID == "" || c.Title == "" || c.run == nil || c.order <= secHost || c.order >= secEnd || c.order%100 == 0 {
		panic(fmt.Sprintf("doctor.register: %q needs an ID, a title, run and an order inside a section", c.ID))
	}
	for _, o := range checks {
		if o.ID == c.ID || o.order == c.order {
			panic(fmt.Sprintf("doctor.register: %q (order %d) registered twice: %q has its ID or order", c.ID, c.order, o.ID))
		}
	}
	i, _ := slices.BinarySearchFunc(checks, c.order, func(o Check, order int) int { return o.order - order })
	checks = slices.Insert(checks, i, c)
}

// everyCheck is every check in report order: what --list, --only and
// --skip know. The profile checks come last and run only when a profile
// was asked for (profileSelection).
func everyCheck() []Check { return slices.Clone(checks) }

// isProfile reports whether c reads the CPU profile (section secProfile).
func (c Check) isProfile() bool { return c.order > secProfile && c.order < secProfile+100 }

// baseChecks is every check but the profile and window ones, in report
// order.
func baseChecks() []Check {
	return slices.DeleteFunc(everyCheck(), func(c Check) bool { return c.isProfile() || c.isWindow() })
}

// profileChecks is the profile checks, in report order.
func profileChecks() []Check {
	return slices.DeleteFunc(everyCheck(), func(c Check) bool { return !c.isProfile() })
}
