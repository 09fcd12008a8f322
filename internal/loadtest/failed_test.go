package loadtest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/erp"
	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/results"
)

// A segment on a database nobody prepared (its set-up is erplab init's,
// before the agents start): a workload that can tell (erp) refuses it
// before the load, writing nothing; one that cannot (smoke) runs, every
// attempt fails, and the run is "failed" with its own exit code, its
// results on disk and its segment incomplete; merge refuses the set,
// and --allow-partial's merged run is failed too.
func TestSegmentWithoutDataFails(t *testing.T) {
	dsn := srv.NewDatabase(t) // empty
	dir := t.TempDir()
	segment := func(spec string) loadtest.Options {
		seg, err := engine.ParseSegment(spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		opts := smokeOptions(t, dsn, time.Second)
		opts.Observe, opts.Progress = false, 0
		opts.Segment, opts.RunID, opts.Out = seg, "nodata", dir+"/"
		return opts
	}

	opts := segment("1/2")
	opts.Workload = erp.New(erp.WorkloadOptions{TempStyle: erp.TempStyle1C})
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), opts, &out)
	if err == nil || res != nil || !strings.Contains(err.Error(), "no erp data set in this database") || !strings.Contains(err.Error(), "erplab init --workload erp") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("erp segment on an empty database: %v\n%s", err, out.String())
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("a refused run left %d files in %s", len(left), dir)
	}

	var docs []*results.Document
	var files []string
	for _, spec := range []string{"1/2", "2/2"} {
		out.Reset()
		res, err := loadtest.Run(context.Background(), segment(spec), &out)
		if !errors.Is(err, loadtest.ErrRunFailed) || exitcode.Of(err) != exitcode.RunFailed || !strings.Contains(err.Error(), "42P01") {
			t.Fatalf("smoke segment %s on an empty database: %v (exit %d)\n%s", spec, err, exitcode.Of(err), out.String())
		}
		if res == nil || res.Path == "" {
			t.Fatalf("segment %s: no results on disk: %+v", spec, res)
		}
		doc, rerr := results.Read(res.Path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if doc.Status.Kind() != results.StatusFailed || len(doc.Segment.Incomplete) == 0 {
			t.Errorf("segment %s: status %q, incomplete %q", spec, doc.Status, doc.Segment.Incomplete)
		}
		if !strings.Contains(out.String(), "\nrun failed: every one of the ") || strings.Contains(out.String(), ": complete\n") {
			t.Errorf("segment %s: the summary does not say the run failed:\n%s", spec, out.String())
		}
		docs, files = append(docs, doc), append(files, filepath.Base(res.Path))
	}
	if _, err := results.Merge(docs, results.MergeOptions{Files: files}); !errors.Is(err, results.ErrIncomplete) || !strings.Contains(err.Error(), "run failed") {
		t.Errorf("merge of failed segments: %v", err)
	}
	m, err := results.Merge(docs, results.MergeOptions{AllowPartial: true, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if why, ok := m.Status.Reason(results.StatusFailed); !ok || !strings.Contains(why, "42P01") {
		t.Errorf("--allow-partial merge of failed segments: status %q", m.Status)
	}
}
