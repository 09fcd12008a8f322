package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
)

// netnsPrefix names every network namespace the cross-host test makes:
// erplabt-<pid>-<node>.
const netnsPrefix = "erplabt-"

// sh runs a command and fails the test with its output on an error.
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sweepNetns deletes the erplabt- namespaces of test processes that are
// gone (a test killed before its clean-up).
func sweepNetns(t *testing.T) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), " ")
		rest, ok := strings.CutPrefix(name, netnsPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err == nil && syscall.Kill(pid, 0) == nil {
			continue // its test is still running
		}
		if err := exec.Command("ip", "netns", "del", name).Run(); err == nil {
			t.Logf("removed the stale network namespace %s", name)
		}
	}
}

// A run split over 3 agents on 3 "hosts" (network namespaces joined by
// a bridge, with a PostgreSQL server in a fourth), merged: the VUs and
// operations are the sums of the segments', the merged p99 is the p99 of
// the union of every sample, the open model's arrivals are the sum of
// the segments' at the whole rate (Poisson tolerance), and a missing
// segment file makes merge refuse.
func TestCrossHostSegments(t *testing.T) {
	pgtest.SkipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates network namespaces (ip netns)")
	}
	if err := exec.Command("ip", "netns", "list").Run(); err != nil {
		t.Skipf("ip netns is not available: %v", err)
	}
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		t.Skipf("no PostgreSQL server binaries: %v", err)
	}
	sweepNetns(t)

	// The network: a switch namespace with a bridge, and one namespace
	// per host with a veth to it. Deleting the namespaces removes the
	// veths and the bridge: nothing is made in the test's own namespace.
	tag := fmt.Sprintf("%s%d-", netnsPrefix, os.Getpid())
	sw := tag + "sw"
	var made []string
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			if out, err := exec.Command("ip", "netns", "del", made[i]).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v %s", made[i], err, out)
			}
		}
	})
	addNS := func(name string) {
		sh(t, "ip", "netns", "add", name)
		made = append(made, name)
		sh(t, "ip", "-n", name, "link", "set", "lo", "up")
	}
	addNS(sw)
	sh(t, "ip", "-n", sw, "link", "add", "erplabt-br", "type", "bridge")
	sh(t, "ip", "-n", sw, "link", "set", "erplabt-br", "up")
	hosts := []struct{ node, addr string }{{"db", "10.231.0.1"}, {"a1", "10.231.0.11"}, {"a2", "10.231.0.12"}, {"a3", "10.231.0.13"}}
	for _, h := range hosts {
		ns := tag + h.node
		addNS(ns)
		port := "erplabt-" + h.node
		sh(t, "ip", "link", "add", "erplabt-eth", "netns", ns, "type", "veth", "peer", "name", port, "netns", sw)
		sh(t, "ip", "-n", sw, "link", "set", port, "master", "erplabt-br", "up")
		sh(t, "ip", "-n", ns, "addr", "add", h.addr+"/24", "dev", "erplabt-eth")
		sh(t, "ip", "-n", ns, "link", "set", "erplabt-eth", "up")
	}

	// The server, in the db namespace, on its veth address only.
	base, err := os.MkdirTemp("", "erplabt-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	data, sock := filepath.Join(base, "data"), filepath.Join(base, "sock")
	for _, d := range []string{data, sock} {
		os.Mkdir(d, 0o700)
		sh(t, "chown", "postgres:postgres", d)
	}
	sh(t, "runuser", "-u", "postgres", "--", filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte("local all all trust\nhost all all 10.231.0.0/24 trust\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh(t, "chown", "postgres:postgres", filepath.Join(data, "pg_hba.conf"))
	pg := exec.Command("ip", "netns", "exec", tag+"db", "runuser", "-u", "postgres", "--", filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=10.231.0.1", "-c", "port=5432", "-c", "unix_socket_directories="+sock,
		"-c", "max_connections=50", "-c", "shared_buffers=32MB", "-c", "fsync=off", "-c", "synchronous_commit=off")
	var pgLog bytes.Buffer
	pg.Stdout, pg.Stderr = &pgLog, &pgLog
	pg.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("runuser", "-u", "postgres", "--", filepath.Join(bin, "pg_ctl"), "-D", data, "stop", "-m", "immediate", "-w").Run() //nolint:errcheck // then killed
		pg.Process.Kill()
		pg.Wait()
	})
	inNS := func(node string, args ...string) *exec.Cmd {
		return exec.Command("ip", append([]string{"netns", "exec", tag + node}, args...)...)
	}
	deadline := time.Now().Add(60 * time.Second)
	for inNS("a1", filepath.Join(bin, "pg_isready"), "-q", "-h", "10.231.0.1", "-p", "5432").Run() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the server in %sdb did not become ready:\n%s", tag, pgLog.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, err := inNS("a1", filepath.Join(bin, "psql"), "-h", "10.231.0.1", "-U", "postgres", "-d", "postgres", "-c", "CREATE DATABASE erplab").CombinedOutput(); err != nil {
		t.Fatalf("create database from %sa1: %v\n%s", tag, err, out)
	}
	dsn := "host=10.231.0.1 port=5432 user=postgres dbname=erplab sslmode=disable"
	dir := t.TempDir()
	agent := func(node string, args ...string) *exec.Cmd {
		cmd := erplab(t, dir, args...)
		self := cmd.Path
		ip, err := exec.LookPath("ip")
		if err != nil {
			t.Fatal(err)
		}
		cmd.Path, cmd.Args = ip, append([]string{"ip", "netns", "exec", tag + node, self}, args...)
		return cmd
	}
	// The data, once, before the barrier: smoke has no erplab init, a
	// short unsegmented run sets it up.
	if out, err := agent("a1", "run", "--dsn", dsn, "--workload", "smoke", "--users", "1", "--duration", "1s", "--observe=false", "--progress", "0", "--out", filepath.Join(dir, "setup.json")).CombinedOutput(); err != nil {
		t.Fatalf("set-up run: %v\n%s", err, out)
	}

	// The segmented run: 12 workers, arrivals at 150/s for 6 s, split
	// over 3 agents that start together at the barrier.
	const rate, vus, seconds = 150.0, 12, 6
	segDir := filepath.Join(dir, "segments")
	os.Mkdir(segDir, 0o755)
	startAt := time.Now().Add(8 * time.Second).UTC().Format(time.RFC3339Nano)
	var wg sync.WaitGroup
	outs := make([][]byte, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = agent(fmt.Sprintf("a%d", i+1), "run", "--dsn", dsn, "--workload", "smoke",
				"--users", strconv.Itoa(vus), "--duration", fmt.Sprintf("%ds", seconds), "--rate", fmt.Sprint(rate), "--connections", "6",
				"--segment", fmt.Sprintf("%d/3", i+1), "--run-id", "xhost", "--start-at", startAt,
				"--observe=false", "--progress", "0", "--graceful-stop", "5s", "--out", segDir+"/").CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("agent %d: %v\n%s", i+1, errs[i], outs[i])
		}
	}
	merged := filepath.Join(dir, "run.json")
	if out, err := erplab(t, dir, "merge", "--dir", segDir, "-o", merged).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	m, err := results.Read(merged)
	if err != nil {
		t.Fatal(err)
	}
	var segs []*results.Document
	for i := range 3 {
		d, err := results.Read(filepath.Join(segDir, fmt.Sprintf("xhost-%dof3.json", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if d.Segment == nil || len(d.Segment.Incomplete) > 0 || d.Segment.Host == "" || d.Agent == nil {
			t.Fatalf("segment %d: %+v, agent %+v\n%s", i+1, d.Segment, d.Agent, outs[i])
		}
		segs = append(segs, d)
	}

	// VUs: each interval of the plateau holds the sum of the agents',
	// which is the profile's 12 (4 each).
	mid := len(m.Series) / 2
	var sum int64
	for _, d := range segs {
		sum += d.Series[mid].VUs
		if d.Series[mid].VUs != vus/3 {
			t.Errorf("segment %s ran %d VUs mid-run, want %d", d.Segment.Label(), d.Series[mid].VUs, vus/3)
		}
	}
	if m.Series[mid].VUs != sum || sum != vus {
		t.Errorf("merged VUs %d mid-run, segments sum to %d, profile %d", m.Series[mid].VUs, sum, vus)
	}
	// Operations and arrivals.
	arrivals := func(d *results.Document) int64 {
		n := d.Totals.BacklogLeft
		for _, op := range d.Operations {
			n += op.Count + op.WarmupCount + op.Skipped + op.WarmupSkipped + op.CutShort.Total()
		}
		return n
	}
	var count, arr int64
	for _, d := range segs {
		count += d.Totals.Count
		a := arrivals(d)
		arr += a
		// Each agent's arrivals: a Poisson stream at a third of the rate.
		want := engine.ExpectedArrivals([]engine.RateStage{{Rate: rate / 3}}, seconds*time.Second)
		if math.Abs(float64(a)-want) > 5*math.Sqrt(want) {
			t.Errorf("segment %s: %d arrivals, want %.0f ± %.0f", d.Segment.Label(), a, want, 5*math.Sqrt(want))
		}
	}
	if m.Totals.Count != count || count == 0 {
		t.Errorf("merged count %d, segments sum to %d", m.Totals.Count, count)
	}
	want := engine.ExpectedArrivals([]engine.RateStage{{Rate: rate}}, seconds*time.Second)
	if got := arrivals(m); got != arr || math.Abs(float64(got)-want) > 5*math.Sqrt(want) {
		t.Errorf("merged arrivals %d (segments sum to %d), want %.0f ± %.0f at %g/s", got, arr, want, 5*math.Sqrt(want), rate)
	}
	// The merged p99 is the p99 of the union of every interval's samples.
	for _, op := range m.Operations {
		union := hdrhistogram.New(1, 3600_000_000, 3)
		for _, d := range segs {
			for _, iv := range d.Series {
				if oi, ok := iv.Ops[op.Name]; ok && oi.Histogram != "" {
					h, err := hdrhistogram.Decode([]byte(oi.Histogram))
					if err != nil {
						t.Fatal(err)
					}
					union.Merge(h)
				}
			}
		}
		if union.TotalCount() > 0 && results.Summarize(union).P99 != op.Response.P99 {
			t.Errorf("%s: merged p99 %g ms, union of the samples %g ms", op.Name, op.Response.P99, results.Summarize(union).P99)
		}
	}
	// One segment file less: merge refuses and writes nothing.
	if err := os.Rename(filepath.Join(segDir, "xhost-2of3.json"), filepath.Join(dir, "moved.json")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(segDir, "xhost-2of3.jsonl"))
	out, err := erplab(t, dir, "merge", "--dir", segDir, "-o", filepath.Join(dir, "partial.json")).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitResults || !strings.Contains(string(out), "segment 2/3 of run \"xhost\" missing") {
		t.Errorf("merge without segment 2: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "partial.json")); err == nil {
		t.Error("merge wrote a document for an incomplete set")
	}
}
