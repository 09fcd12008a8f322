package loadtest

import (
	"context"
	"fmt"
	"io"

	"github.com/erplab/erplab/internal/profile"
)

// runProfile is the perf recording of a run (--profile); nil when off.
type runProfile struct{ sess *profile.Session }

// startProfile starts recording the server at dsn when on; when it
// cannot (perf missing or not permitted, remote server) it says why in
// one line and returns nil.
func startProfile(ctx context.Context, on bool, dsn string, say func(string, ...any)) *runProfile {
	if !on {
		return nil
	}
	sess, err := profile.Begin(ctx, dsn, profile.Options{})
	if err != nil {
		say("warning: profile off: %v", err)
		return nil
	}
	if sess.Warning != "" {
		say("warning: %s", sess.Warning)
	}
	say("profiling the server's processes %v with perf at %d Hz", sess.Roots(), profile.DefaultFrequency)
	return &runProfile{sess}
}

// end stops the recording and returns its summary (nil when off or
// when reading it back failed, said in one line).
func (p *runProfile) end(ctx context.Context, say func(string, ...any)) *profile.Summary {
	if p == nil {
		return nil
	}
	sum, _, err := p.sess.End(context.WithoutCancel(ctx))
	if err != nil {
		say("warning: profile lost: %v", err)
		return nil
	}
	return sum
}

// printProfile prints the subsystem shares and the top functions.
func printProfile(w io.Writer, s *profile.Summary) {
	if s == nil {
		return
	}
	fmt.Fprintln(w, "\nserver CPU profile (perf):")
	s.WriteTable(w, 10)
}
