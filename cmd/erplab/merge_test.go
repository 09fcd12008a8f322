package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/results"
)

// copySegments copies the recorded segments of run r1 (internal/results
// testdata) named by index into a fresh directory.
func copySegments(t *testing.T, which ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, i := range which {
		b, err := os.ReadFile(filepath.Join("..", "..", "internal", "results", "testdata", "segments", "r1-"+i+"of3.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "r1-"+i+"of3.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func exitOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

func TestMergeCommand(t *testing.T) {
	dir := copySegments(t, "1", "2", "3")
	out := filepath.Join(dir, "run.json")
	b, err := erplab(t, dir, "merge", "--dir", dir, "-o", out).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "merged run r1: 3 of 3 segments") {
		t.Fatalf("merge: %v\n%s", err, b)
	}
	m, err := results.Read(out)
	if err != nil || m.Merged == nil || m.Merged.Partial {
		t.Fatalf("merged document: %v %+v", err, m)
	}
	// Merged again over the same directory: its own output is skipped.
	if b, err := erplab(t, dir, "merge", dir, "-o", out+"2", "--apdex-min", "0.5").CombinedOutput(); err != nil {
		t.Fatalf("merge beside its output: %v\n%s", err, b)
	}
	// --apdex-min is evaluated on the merged run (0.98 here).
	b, err = erplab(t, dir, "merge", filepath.Join(dir, "r1-1of3.json"), filepath.Join(dir, "r1-2of3.json"), filepath.Join(dir, "r1-3of3.json"), "-o", filepath.Join(dir, "x.json"), "--apdex-min", "0.99").CombinedOutput()
	if exitOf(err) != exitThreshold || !strings.Contains(string(b), "below --apdex-min 0.99") {
		t.Errorf("--apdex-min 0.99: %v\n%s", err, b)
	}
	// compare reads the merged run like any other.
	if b, err := erplab(t, dir, "compare", out, filepath.Join(dir, "r1-1of3.json")).CombinedOutput(); err != nil && exitOf(err) != exitThreshold {
		t.Errorf("compare merged vs segment: %v\n%s", err, b)
	}
}

// The merged run keeps what every segment recorded beside its figures:
// report shows segment 3/3's server profile (the only one) and the
// observations, compare reads the profile, and the document keeps
// segment 2/3's stress in merged.segments[1].extra.
func TestMergeKeepsSegmentsExtra(t *testing.T) {
	dir := t.TempDir()
	for i := 1; i <= 3; i++ {
		n := fmt.Sprintf("r2-%dof3.json", i)
		b, err := os.ReadFile(filepath.Join("..", "..", "internal", "results", "testdata", "segments-extra", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "run.json")
	if b, err := erplab(t, dir, "merge", dir, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, b)
	}
	m, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Extra["profile"] == nil || m.Extra["observations"] == nil || m.Merged.Segments[1].Extra["stress"] == nil || m.Extra["stress"] != nil {
		t.Errorf("merged extra %d sections, segment 2/3's %d: want profile and observations in extra, stress in segment 2/3's only", len(m.Extra), len(m.Merged.Segments[1].Extra))
	}
	b, err := erplab(t, dir, "report", out).CombinedOutput()
	if err != nil || !strings.Contains(string(b), `<h2 id="profile">Server CPU profile (perf)</h2>`) || !strings.Contains(string(b), `<h2 id="observations">`) {
		t.Errorf("report of the merged run: %v, %d bytes, want the profile and observations sections", err, len(b))
	}
	b, err = erplab(t, dir, "compare", out, filepath.Join(dir, "r2-3of3.json")).CombinedOutput()
	if (err != nil && exitOf(err) != exitThreshold) || !strings.Contains(string(b), "cpu catalog access") {
		t.Errorf("compare merged vs segment 3/3: %v, want the profile's rows\n%s", err, b)
	}
}

// An incomplete set: merge waits for it (--wait) and then refuses with
// exit 6, writing nothing, unless --allow-partial, which says so.
func TestMergeIncompleteSet(t *testing.T) {
	dir := copySegments(t, "1", "3")
	out := filepath.Join(dir, "run.json")
	t0 := time.Now()
	b, err := erplab(t, dir, "merge", "--wait", "2s", "--dir", dir, "-o", out).CombinedOutput()
	if exitOf(err) != exitResults || !strings.Contains(string(b), `segment 2/3 of run "r1" missing`) || strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
		t.Errorf("merge of 2 of 3: %v\n%s", err, b)
	}
	if time.Since(t0) < 2*time.Second {
		t.Errorf("--wait 2s returned after %s", time.Since(t0))
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a document was written for an incomplete set")
	}
	b, err = erplab(t, dir, "merge", "--allow-partial", "--dir", dir, "-o", out).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "PARTIAL (--allow-partial)") {
		t.Fatalf("--allow-partial: %v\n%s", err, b)
	}
	m, err := results.Read(out)
	if err != nil || !m.Merged.Partial || m.Merged.Missing[0] != "2/3" {
		t.Errorf("partial document: %v %+v", err, m.Merged)
	}
	// An agent that died mid-run left a stream only: once the stream has
	// gone unwritten for a while, --wait stops waiting, and the killed
	// segment makes the set incomplete.
	seg2, err := results.Read(filepath.Join(copySegments(t, "2"), "r1-2of3.json"))
	if err != nil {
		t.Fatal(err)
	}
	stream := filepath.Join(dir, "r1-2of3.jsonl")
	st, err := results.CreateStream(stream, results.DefaultPerm)
	if err != nil {
		t.Fatal(err)
	}
	header := *seg2
	header.Status, header.Series, header.Operations = "running", nil, nil
	st.Write(results.StreamLine{Type: "header", Header: &header})
	for i := range seg2.Series[:2] {
		st.Write(results.StreamLine{Type: "interval", Interval: &seg2.Series[i]})
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * staleStream)
	os.Chtimes(stream, old, old)
	os.Remove(out)
	t0 = time.Now()
	b, err = erplab(t, dir, "merge", "--wait", "10m", "--dir", dir, "-o", out).CombinedOutput()
	if exitOf(err) != exitResults || !strings.Contains(string(b), "segment 2/3 run killed: stream ended at t=2s") || time.Since(t0) > 5*time.Minute {
		t.Errorf("merge with a dead agent's stream: %v after %s\n%s", err, time.Since(t0), b)
	}

	// Bad usage: no -o, --wait without a directory.
	for _, args := range [][]string{{"merge", dir}, {"merge", filepath.Join(dir, "r1-1of3.json"), "--wait", "1s", "-o", out}} {
		if b, err := erplab(t, dir, args...).CombinedOutput(); exitOf(err) != exitUsage {
			t.Errorf("%v: %v\n%s", args, err, b)
		}
	}
}

// OUT naming an input is a usage error before anything is read or
// written; a segment of another database is foreign (exit 1).
func TestMergeRefusesOutAsInputAndForeignServer(t *testing.T) {
	dir := copySegments(t, "1", "2", "3")
	in := []string{filepath.Join(dir, "r1-1of3.json"), filepath.Join(dir, "r1-2of3.json"), filepath.Join(dir, "r1-3of3.json")}
	before, _ := os.ReadFile(in[0])
	for _, out := range []string{in[0], filepath.Join(dir, ".", "sub", "..", "r1-1of3.json")} {
		b, err := erplab(t, dir, append([]string{"merge", "-o", out}, in...)...).CombinedOutput()
		if exitOf(err) != exitUsage || !strings.Contains(string(b), "is one of the segment documents") || strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
			t.Errorf("-o %s: %v\n%s", out, err, b)
		}
	}
	if after, _ := os.ReadFile(in[0]); string(after) != string(before) {
		t.Error("segment 1 was overwritten")
	}
	for i, db := range []string{"seg", "seg", "seg3"} {
		d, err := results.Read(in[i])
		if err != nil {
			t.Fatal(err)
		}
		d.Environment = []byte(`{"server":{"system_identifier":"7301","database":"` + db + `"}}`)
		if err := results.ReplaceJSON(in[i], d, results.DefaultPerm); err != nil {
			t.Fatal(err)
		}
	}
	b, err := erplab(t, dir, append([]string{"merge", "-o", filepath.Join(dir, "m.json")}, in...)...).CombinedOutput()
	if exitOf(err) != 1 || !strings.Contains(string(b), `r1-3of3.json (segment 3/3) ran against another server than `+in[0]+` (segment 1/3): database "seg3", not "seg"`) {
		t.Errorf("another database: %v\n%s", err, b)
	}
}

// A restarted segment beside its earlier attempt: exit 6 naming the
// restart; --allow-partial merges one attempt and says which.
func TestMergeRestartedSegment(t *testing.T) {
	dir := copySegments(t, "1", "2", "3")
	d, err := results.Read(filepath.Join(dir, "r1-3of3.json"))
	if err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(dir, "r1-3of3.json")
	restart := filepath.Join(dir, "r1-3of3-restart-2.json")
	d.Segment.Restart, d.Segment.Incomplete = 2, []string{"restarted: an earlier attempt of this segment left " + orig}
	if err := d.WriteFile(restart, results.DefaultPerm); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "merged.json")
	b, err := erplab(t, dir, "merge", dir, "-o", out).CombinedOutput()
	if exitOf(err) != exitResults || !strings.Contains(string(b), "segment 3/3 restarted (2 attempts: "+orig+", "+restart+")") {
		t.Errorf("restart beside its earlier attempt: %v\n%s", err, b)
	}
	b, err = erplab(t, dir, "merge", "--allow-partial", dir, "-o", out).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "note: segment 3/3: used the attempt "+restart+" (completed), left out "+orig) || !strings.Contains(string(b), "PARTIAL") {
		t.Fatalf("--allow-partial: %v\n%s", err, b)
	}
	m, err := results.Read(out)
	if err != nil || !m.Merged.Partial || len(m.Merged.Segments) != 3 || m.Merged.Segments[2].File != restart || len(m.Merged.Notes) != 1 {
		t.Errorf("partial document: %v %+v", err, m.Merged)
	}
}

// Segment options refused in one line as usage errors, before anything
// connects.
func TestRunSegmentUsage(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--segment", "0/3"}, "in 1..3"},
		{[]string{"--segment", "4/3"}, "in 1..3"},
		{[]string{"--segment", "1/0"}, "want I/N"},
		{[]string{"--segment", "x/3"}, "in 1..3"},
		{[]string{"--segment", "auto/3"}, "JOB_COMPLETION_INDEX is not set"},
		{[]string{"--segment", "1/3", "--dsn", "host=x"}, "needs --run-id"},
		{[]string{"--segment", "1/3", "--run-id", "r"}, "needs the server all agents share"},
		{[]string{"--segment", "1/3", "--run-id", "a/b", "--dsn", "host=x"}, "only letters"},
		{[]string{"--start-at", "tomorrow"}, "RFC 3339"},
		{[]string{"--execution-segment", "1/2:1/3"}, "0 <= a < b <= 1"},
		{[]string{"--execution-segment", "0:1/3", "--execution-segment-sequence", "0,1/2,1"}, "is not a piece"},
	} {
		cmd := erplab(t, dir, append([]string{"run"}, c.args...)...)
		var env []string
		for _, e := range cmd.Env {
			if !strings.HasPrefix(e, "JOB_COMPLETION_INDEX=") {
				env = append(env, e)
			}
		}
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		if exitOf(err) != exitUsage || !strings.Contains(string(b), c.want) || strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
			t.Errorf("run %v: %v, want exit 2 and one line with %q:\n%s", c.args, err, c.want, b)
		}
	}
}

// A results directory reused by several runs (a Kubernetes claim): the
// other run's segment is refused as foreign, unless --run-id picks this
// run's documents; --run-id with files given is a usage error.
func TestMergeRunIDFilter(t *testing.T) {
	dir := copySegments(t, "1", "2", "3")
	d, err := results.Read(filepath.Join(dir, "r1-1of3.json"))
	if err != nil {
		t.Fatal(err)
	}
	d.RunID = "r0"
	if err := d.WriteFile(filepath.Join(dir, "r0-1of3.json"), results.DefaultPerm); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run.json")
	if b, err := erplab(t, dir, "merge", "--dir", dir, "-o", out).CombinedOutput(); exitOf(err) != 1 {
		t.Errorf("another run's segment in the directory: %v\n%s", err, b)
	}
	b, err := erplab(t, dir, "merge", "--dir", dir, "--run-id", "r1", "-o", out).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "merged run r1: 3 of 3 segments") {
		t.Fatalf("--run-id r1: %v\n%s", err, b)
	}
	if b, err := erplab(t, dir, "merge", "--run-id", "r1", "-o", out+"2", filepath.Join(dir, "r1-1of3.json")).CombinedOutput(); exitOf(err) != exitUsage {
		t.Errorf("--run-id with files: %v\n%s", err, b)
	}
}
