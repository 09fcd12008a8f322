// Package runenv describes the environment of a load-test run for the
// results file: the host the tool ran on ([ReadHost]) and the PostgreSQL
// server it loaded ([ReadServer]), so that two runs can be compared knowing
// what differed between them.
package runenv

import (
	"fmt"

	"github.com/erplab/erplab/internal/hostfacts"
)

// Host describes the machine a run executed on; see [hostfacts.Host].
type Host = hostfacts.Host

// ReadHost reads the host description from a proc tree (normally "/proc")
// and a sys tree (normally "/sys"); tests pass fixture trees. It is
// [hostfacts.FS.Host] of those roots, with the same errors: a file that
// cannot be read or parsed, named in the message.
func ReadHost(procRoot, sysRoot string) (Host, error) {
	fs, err := hostfacts.New(procRoot, sysRoot)
	if err != nil {
		return Host{}, fmt.Errorf("read host: %w", err)
	}
	return fs.Host()
}
