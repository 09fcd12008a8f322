package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/erplab/erplab/internal/workload"
)

// mix is one role's mix of key operations: the operations it runs and
// their cumulative weights.
type mix struct {
	role string
	ops  []int
	cum  []float64 // cumulative weights
}

func (m *mix) pick(r *rand.Rand) int {
	if len(m.ops) == 1 {
		// one operation: no draw (pgbench's chooseScript with one script)
		return m.ops[0]
	}
	x := r.Float64() * m.cum[len(m.cum)-1]
	for i, c := range m.cum {
		if x < c {
			return m.ops[i]
		}
	}
	return m.ops[len(m.ops)-1]
}

func buildMixes(ops []workload.Operation, roles []workload.Role) ([]*mix, error) {
	idx := map[string]int{}
	for i, op := range ops {
		idx[op.Name] = i
	}
	var out []*mix
	for _, r := range roles {
		m := &mix{role: r.Name}
		total := 0.0
		// iterate in operation order so the mix is deterministic
		for i, op := range ops {
			w, ok := r.Mix[op.Name]
			if !ok || w <= 0 {
				continue
			}
			total += w
			m.ops = append(m.ops, i)
			m.cum = append(m.cum, total)
		}
		for name := range r.Mix {
			if _, ok := idx[name]; !ok {
				return nil, fmt.Errorf("role %s: unknown operation %q", r.Name, name)
			}
		}
		if total <= 0 {
			return nil, fmt.Errorf("role %s: no operation with positive weight", r.Name)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, errors.New("no roles to run")
	}
	return out, nil
}

// roleOf is the role of the VU of run-wide id (ids ascending): roleFor
// replayed over every id up to it, those of other segments included, so
// that a segment's VUs get the roles one machine would have given them.
func (e *run) roleOf(id int) *mix {
	for e.roleN < id {
		e.roleN++
		e.lastRole = e.roleFor(e.roleN)
	}
	return e.lastRole
}

// roleFor assigns the next VU's role so that the counts follow the roles'
// shares as closely as possible at every VU count (deficit round robin).
func (e *run) roleFor(n int) *mix {
	if e.assigned == nil {
		e.assigned = make([]float64, len(e.mixes))
	}
	total := 0.0
	for _, r := range e.cfg.Roles {
		total += r.Share
	}
	best, bestDef := 0, -1e18
	for i, r := range e.cfg.Roles {
		def := r.Share/total*float64(n) - e.assigned[i]
		if def > bestDef {
			best, bestDef = i, def
		}
	}
	e.assigned[best]++
	return e.mixes[best]
}
