package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/stress"
)

// stressAttachment runs stress workers beside the load (--stress) and
// keeps their report (extra.stress).
type stressAttachment struct {
	quiet
	spec stress.Spec
	run  *stress.Run
	rep  *stress.Report
}

func (s *stressAttachment) start(ctx context.Context, r *runState) error {
	var err error
	if s.run, err = stress.Start(ctx, s.spec); err != nil {
		return err
	}
	r.say("stress workers started beside the load: %s", stressDesc(s.spec))
	return nil
}

func (s *stressAttachment) stop(_ context.Context, _ *runState, doc *results.Document) {
	rep := s.run.Stop()
	s.rep = &rep
	doc.Extra["stress"], _ = json.Marshal(s.rep)
}

func (s *stressAttachment) report(w io.Writer, _ *results.Document) {
	if s.rep != nil {
		fmt.Fprintln(w, "\nstress workers beside the load:")
		stress.WriteTable(w, *s.rep)
	}
}

func (s *stressAttachment) close() {
	if s.run != nil {
		s.run.Stop()
	}
}

func stressDesc(s stress.Spec) string {
	var parts []string
	for _, kv := range []struct {
		name string
		n    int
	}{{"cpu", s.CPU}, {"io", s.IO}, {"vm", s.VM}} {
		if kv.n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", kv.name, kv.n))
		}
	}
	if s.VM > 0 && s.VMBytes > 0 {
		parts = append(parts, fmt.Sprintf("vm-bytes=%d", s.VMBytes))
	}
	return strings.Join(parts, ",")
}
