package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/doctor"
	"github.com/erplab/erplab/internal/profile"
)

// doctorProfile records the server at dsn for d with perf (doctor
// --profile) for the doctor's profile-* checks. When it cannot (perf
// missing or not permitted, remote server) it prints "cannot profile:
// REASON" on stderr, one line, and the checks report that reason as not
// checked; nothing else fails. Errors: ctx cancelled.
func doctorProfile(ctx context.Context, stderr io.Writer, dsn string, d time.Duration) (doctor.ProfileFacts, error) {
	unavailable := func(err error) doctor.ProfileFacts {
		why := strings.TrimPrefix(err.Error(), "profile: ")
		fmt.Fprintln(stderr, "cannot profile: "+why)
		return doctor.ProfileFacts{Unavailable: why}
	}
	sess, err := profile.Begin(ctx, dsn, profile.Options{})
	if err != nil {
		if ctx.Err() != nil {
			return doctor.ProfileFacts{}, ctx.Err()
		}
		return unavailable(err), nil
	}
	if sess.Warning != "" {
		fmt.Fprintln(stderr, "warning: "+sess.Warning)
	}
	fmt.Fprintf(stderr, "profiling the server's processes %v for %s at %d Hz...\n", sess.Roots(), d, profile.DefaultFrequency)
	select {
	case <-time.After(d):
	case <-ctx.Done():
		sess.Abort()
		return doctor.ProfileFacts{}, ctx.Err()
	}
	sum, _, err := sess.End(context.WithoutCancel(ctx))
	if err != nil {
		return unavailable(err), nil
	}
	return doctor.ProfileFacts{Summary: sum}, nil
}

// errProfileNegative is the usage error of a negative --profile.
var errProfileNegative = errors.New("--profile must be >= 0 (a duration such as 10s; 0 = no profile)")

// doctorProbes adds the shared-invalidation uprobes to the server at dsn
// and starts counting (doctor --probes) for the invalidation-chain
// check, which ends the count after the sample; the caller aborts it on
// every path (removing the probes). When they cannot run (not root, perf
// missing, remote server) it prints one line on stderr and the check
// reports that reason with the estimate.
func doctorProbes(ctx context.Context, stderr io.Writer, dsn string) doctor.InvalFacts {
	rec, err := profile.BeginInval(ctx, dsn, profile.InvalOptions{})
	if err != nil {
		why := strings.TrimPrefix(err.Error(), "profile: ")
		fmt.Fprintln(stderr, profile.UnavailableLine(why))
		return doctor.InvalFacts{Unavailable: why}
	}
	fmt.Fprintln(stderr, "counting shared invalidation with perf uprobes during the sample")
	return doctor.InvalFacts{Recording: rec}
}
