package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/results"
)

// A segmented agent: its share of the VUs and connections, the run's id,
// configuration hash and segment in its results, no data set-up, its
// CPU; a second attempt of the same segment (a restart) and a late
// start run but mark the segment incomplete; a clock off the server's by
// more than the bound is refused before anything runs.
func TestSegmentedAgent(t *testing.T) {
	dsn := srv.NewDatabase(t)
	// The data, once, as erplab init would: an unsegmented run.
	whole := smokeOptions(t, dsn, time.Second)
	whole.Observe, whole.Progress = false, 0
	if _, err := loadtest.Run(context.Background(), whole, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	seg, err := engine.ParseSegment("2/3", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts := smokeOptions(t, dsn, 3*time.Second)
	opts.Observe, opts.Progress = false, 0
	opts.Stages = []engine.Stage{{Duration: 0, Target: 10}, {Duration: 3 * time.Second, Target: 10}}
	opts.Connections = 5
	opts.Segment, opts.RunID, opts.Out = seg, "t1", dir+"/"
	opts.StartAt = time.Now().Add(500 * time.Millisecond)
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if want := filepath.Join(dir, "t1-2of3.json"); res.Path != want {
		t.Fatalf("results at %s, want %s", res.Path, want)
	}
	doc, err := results.Read(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	s := doc.Segment
	if s == nil || s.Index != 2 || s.Count != 3 || s.From != "1/3" || s.To != "2/3" || len(s.Incomplete) > 0 || doc.RunID != "t1" || !strings.HasPrefix(doc.ConfigHash, "sha256:") {
		t.Fatalf("segment %+v, run %q, hash %q\n%s", s, doc.RunID, doc.ConfigHash, out.String())
	}
	if !strings.Contains(out.String(), "data set-up skipped") {
		t.Errorf("no line says the set-up was skipped:\n%s", out.String())
	}
	// 10 VUs over 3: this piece runs 3 on 2 of the 5 connections (1, 4, 7 and 1, 4 of the stripes).
	if vus := doc.Series[1].VUs; vus != 3 {
		t.Errorf("segment 2/3 ran %d VUs, want 3 of 10", vus)
	}
	if !strings.Contains(out.String(), "runs 3 of the 10 VUs max on 2 pooled connections") {
		t.Errorf("no share line:\n%s", out.String())
	}
	if doc.Agent == nil || doc.Agent.CPUSeconds <= 0 || doc.Agent.Cores < 1 || len(doc.Agent.PerInterval) != len(doc.Series) {
		t.Errorf("agent CPU %+v for %d intervals", doc.Agent, len(doc.Series))
	}

	// The same segment again: a restart, and late for its barrier.
	out.Reset()
	opts.StartAt = time.Now().Add(-5 * time.Second)
	res2, err := loadtest.Run(context.Background(), opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	doc2, err := results.Read(res2.Path)
	if err != nil {
		t.Fatal(err)
	}
	why := strings.Join(doc2.Segment.Incomplete, " | ")
	if res2.Path != filepath.Join(dir, "t1-2of3-restart-2.json") || !strings.Contains(why, "restarted: an earlier attempt of this segment left "+res.Path) || !strings.Contains(why, "late start") {
		t.Errorf("second attempt at %s, incomplete %q\n%s", res2.Path, why, out.String())
	}
	if doc2.ConfigHash != doc.ConfigHash {
		t.Errorf("same options, hashes %s and %s", doc.ConfigHash, doc2.ConfigHash)
	}
	if doc2.Segment.Restart != 2 || doc.Segment.Restart != 0 {
		t.Errorf("attempt numbers %d and %d, want 0 and 2", doc.Segment.Restart, doc2.Segment.Restart)
	}
	// Both attempts of the piece: an incomplete set naming the restart;
	// --allow-partial merges the latest completed attempt and says so.
	files := []string{res.Path, res2.Path}
	if _, err := results.Merge([]*results.Document{doc, doc2}, results.MergeOptions{Files: files}); !errors.Is(err, results.ErrIncomplete) || !strings.Contains(err.Error(), "segment 2/3 restarted (2 attempts: "+res.Path+", "+res2.Path+")") {
		t.Errorf("merge of two attempts: %v", err)
	}
	m, err := results.Merge([]*results.Document{doc, doc2}, results.MergeOptions{AllowPartial: true, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Merged.Segments) != 1 || m.Merged.Segments[0].File != res2.Path || len(m.Merged.Notes) != 1 || !strings.Contains(m.Merged.Notes[0], "used the attempt "+res2.Path+" (completed), left out "+res.Path) {
		t.Errorf("partial merge of two attempts: segments %+v, notes %q", m.Merged.Segments, m.Merged.Notes)
	}
	// The run records the server's identity (what merge compares).
	var env loadtest.Environment
	if err := json.Unmarshal(doc.Environment, &env); err != nil || env.Server.SystemIdentifier == "" || env.Server.Database == "" {
		t.Errorf("environment server identity %q/%q (%v)", env.Server.SystemIdentifier, env.Server.Database, err)
	}

	// A clock bound no real clock meets.
	opts.MaxClockOffset, opts.StartAt = time.Nanosecond, time.Time{}
	_, err = loadtest.Run(context.Background(), opts, &out)
	if !errors.Is(err, loadtest.ErrClockOffset) || strings.Contains(err.Error(), "\n") {
		t.Errorf("clock offset above 1ns: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "t1-2of3-restart-3.jsonl")); err == nil {
		t.Error("a refused agent left a stream")
	}

	// Another run's file at --out is neither a restart nor overwritten.
	o := opts
	o.RunID, o.Out, o.MaxClockOffset = "newrun", res.Path, loadtest.DefaultMaxClockOffset
	before, _ := os.ReadFile(res.Path)
	_, err = loadtest.Run(context.Background(), o, &out)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), `holds segment 2/3 of run "t1", not segment 2/3 of run "newrun"`) {
		t.Errorf("--out naming run t1's file for run newrun: %v", err)
	}
	if after, _ := os.ReadFile(res.Path); !bytes.Equal(before, after) {
		t.Error("another run's file was changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "t1-2of3-restart-3.jsonl")); err == nil {
		t.Error("a refused agent left a stream")
	}

	// Without a shared server or a run id.
	o = opts
	o.DSN = ""
	if _, err := loadtest.Run(context.Background(), o, &out); err == nil || !strings.Contains(err.Error(), "--dsn") {
		t.Errorf("segment without a server: %v", err)
	}
	o = opts
	o.RunID = ""
	if _, err := loadtest.Run(context.Background(), o, &out); err == nil || !strings.Contains(err.Error(), "--run-id") {
		t.Errorf("segment without a run id: %v", err)
	}
}
