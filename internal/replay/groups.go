package replay

import (
	"iter"
	"time"

	"github.com/erplab/erplab/internal/capture"
)

// Group is a key operation a replay scores: its name and APDEX target T.
type Group struct {
	Name   string
	Target time.Duration
	// By is how its statements were grouped ("operation", "targets" or
	// "fingerprint").
	By string
}

// Groups are the key operations a replay of src with opts scores (its
// targets and T), in the order of the results document's operations,
// without connecting to anything: what a command checks a --primary or
// --p95 operation name against before a run.
func Groups(src iter.Seq2[capture.Event, error], opts Options) ([]Group, error) {
	p, _, err := prepare(src, opts)
	if err != nil {
		return nil, err
	}
	out := make([]Group, len(p.groups))
	for i, g := range p.groups {
		out[i] = Group{Name: g.name, Target: g.target, By: g.by}
	}
	return out, nil
}
