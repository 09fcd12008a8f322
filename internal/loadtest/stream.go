package loadtest

import (
	"context"

	"github.com/erplab/erplab/internal/results"
)

// streamAttachment writes the run's time series to its results stream
// (X.jsonl) as the load goes: the header at the start, one line per
// interval. The summary line and the final document are written by
// writeResults, after the summary is printed.
type streamAttachment struct {
	quiet
	stream *results.Stream
}

// newStream is the run's stream on the reserved file (a discarding one
// without results); it becomes r.stream.
func newStream(files *runFiles) *streamAttachment {
	s := results.DiscardStream()
	if !files.none {
		s = results.NewStreamNamed(files.file, files.streamPath)
	}
	return &streamAttachment{stream: s}
}

func (s *streamAttachment) start(_ context.Context, r *runState) error {
	return s.stream.Write(results.StreamLine{Type: "header", Header: r.doc})
}

func (s *streamAttachment) interval(r *runState, iv results.Interval) {
	if s.stream.Err() != nil {
		return // reported when it failed
	}
	if err := s.stream.Write(results.StreamLine{Type: "interval", Interval: &iv}); err != nil {
		// At once, whatever the progress period: the run goes on
		// and the final document will hold everything.
		r.say("warning: at t=%.1f s: %v; the stream stops here (intervals up to t=%s s kept), the run goes on and the final document will hold everything",
			iv.T, err, fmtSeconds(s.stream.LastT()))
	}
}

func (s *streamAttachment) stop(_ context.Context, _ *runState, doc *results.Document) {
	if err := s.stream.Err(); err != nil {
		doc.StreamError = err.Error()
	}
}

func (s *streamAttachment) close() { s.stream.Close() }
