package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// erplab proxy --metrics: a malformed address, a port out of range and a
// port in use are one-line usage errors (exit 2) before the proxy starts
// (no side connection tried, nothing listened on); a good address serves
// the proxy's counters. No server is needed: the upstream is a socket
// directory that does not exist.
func TestProxyMetricsAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	upstream := "host=/nonexistent-erplab-test dbname=x user=x"
	for _, c := range []struct{ addr, want string }{
		{"banana", `erplab: --metrics "banana": want HOST:PORT, e.g. 127.0.0.1:9187: address banana: missing port in address`},
		{"127.0.0.1:99999", `erplab: --metrics "127.0.0.1:99999": want HOST:PORT, e.g. 127.0.0.1:9187: port "99999" is not a number 0..65535`},
		{busy.Addr().String(), `erplab: --metrics "` + busy.Addr().String() + `": cannot listen there: bind: address already in use`},
	} {
		out, err := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", upstream, "--metrics", c.addr).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
			t.Errorf("--metrics %s: %v, want exit %d\n%s", c.addr, err, exitUsage, out)
		}
		if got := strings.TrimSuffix(string(out), "\n"); got != c.want {
			t.Errorf("--metrics %s: output\n%q\nwant the one line\n%q", c.addr, got, c.want)
		}
	}

	// --listen on a port in use: the same usage error, before any side
	// connection is tried (it was exit 1, after the log-in).
	out, err := erplab(t, t.TempDir(), "proxy", "--listen", busy.Addr().String(), "--upstream", upstream).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Errorf("--listen in use: %v, want exit %d\n%s", err, exitUsage, out)
	}
	if got, want := strings.TrimSuffix(string(out), "\n"), `erplab: --listen "`+busy.Addr().String()+`": cannot listen there: bind: address already in use`; got != want {
		t.Errorf("--listen in use: output\n%q\nwant the one line\n%q", got, want)
	}

	// The same address for both (it said the address was in use).
	out, _ = erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:6499", "--upstream", upstream, "--metrics", "127.0.0.1:6499").CombinedOutput()
	if got, want := strings.TrimSuffix(string(out), "\n"), `erplab: --listen and --metrics are both "127.0.0.1:6499": give the metrics another port`; got != want {
		t.Errorf("same address: %q, want %q", got, want)
	}

	cmd := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", upstream, "--metrics", "127.0.0.1:0")
	var stdout strings.Builder
	_, _, sc, before := startListening(t, cmd, &stdout)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	go func() {
		for sc.Scan() { // keep the proxy's stderr drained
		}
	}()
	var url string
	for _, l := range before {
		if rest, ok := strings.CutPrefix(l, "metrics on "); ok {
			url = rest
		}
	}
	if url == "" {
		t.Fatalf("proxy did not say where its metrics are: %q", before)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `erplab_proxy_events_total{event="sessions"} 0`) {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
}

// An upstream nobody listens on (a TCP port this test bound and closed):
// the proxy still starts, and says so in one warning line that names the
// address, the cause and --upstream, without pgconn's one line per
// address tried and without the password. No server is needed.
func TestProxyUnreachableUpstreamOneLine(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	upstream := fmt.Sprintf("host=127.0.0.1 port=%d dbname=x user=x password=s3cr3t-upstream", port)
	cmd := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", upstream)
	var stdout strings.Builder
	_, _, sc, before := startListening(t, cmd, &stdout)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	go func() {
		for sc.Scan() {
		}
	}()
	var side []string
	for _, l := range before {
		if strings.Contains(l, "s3cr3t-upstream") {
			t.Errorf("password in the proxy's output: %q", l)
		}
		if strings.Contains(l, "side connection") || strings.Contains(l, "dial") {
			side = append(side, l)
		}
	}
	want := fmt.Sprintf(`err="cannot reach server at 127.0.0.1:%d: connection refused; is PostgreSQL running there? check host and port in --upstream"`, port)
	if len(side) != 1 || !strings.HasSuffix(side[0], want) || strings.Contains(side[0], `\n`) {
		t.Fatalf("lines about the side connection before 'listening':\n%s\nwant one, ending in %s", strings.Join(side, "\n"), want)
	}
}
