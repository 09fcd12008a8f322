package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
)

// Bounds of a restart of the user's server (ab --dsn --allow-restart):
// pg_ctl's own wait (-t) and, after it, the wait until the DSN connects.
const (
	pgCtlWaitSeconds = 300
	restartConnWait  = 2 * time.Minute
)

// localServer is a server erplab did not start that it may restart (ab
// --dsn --allow-restart): reached through a Unix socket or a loopback
// address, its data directory (SHOW data_directory) on this host with a
// postmaster.pid naming the DSN's port, and erplab root or the data
// directory's owner. It is restarted with the pg_ctl beside the running
// postmaster's binary, as the data directory's owner.
type localServer struct {
	dsn      string
	dataDir  string
	uid, gid uint32
	owner    string
	pgCtl    string
	log      string // pg_ctl -l, made at the first restart
}

// localHost reports whether host (a libpq host) is on this machine: a
// Unix socket directory or a loopback name or address.
func localHost(host string) bool {
	if strings.HasPrefix(host, "/") || strings.HasPrefix(host, "@") || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// findLocalServer checks that the server of dsn is one erplab may
// restart or mount beside (localServer) and says, in one line starting
// with why (the flag or variant asking), why not.
// onThisHost refuses, without connecting, a dsn whose host is not a Unix
// socket, localhost or a loopback address (localHost): erplab restarts a
// server and mounts beside it only on this host. why prefixes the error.
func onThisHost(dsn, why string) error {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("%s: %s", why, conninfo.Describe(err))
	}
	if !localHost(cfg.Host) {
		return fmt.Errorf("%s: the --dsn server (host %s) is not on this host: erplab restarts a server and mounts beside it only through a Unix socket or localhost", why, cfg.Host)
	}
	return nil
}

func findLocalServer(ctx context.Context, dsn, why string) (*localServer, error) {
	if err := onThisHost(dsn, why); err != nil {
		return nil, err
	}
	conn, err := conninfo.Connect(ctx, dsn, "erplab-ab", nil)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var dataDir string
	var port int
	if err := conn.QueryRow(ctx, `SELECT current_setting('data_directory'), current_setting('port')::int`).Scan(&dataDir, &port); err != nil {
		return nil, fmt.Errorf("%s: SHOW data_directory: %s (a superuser or pg_read_all_settings may read it)", why, conninfo.Describe(err))
	}
	s := &localServer{dsn: dsn, dataDir: dataDir}
	if err := s.owned(why); err != nil {
		return nil, err
	}
	pid, err := postmasterPID(why, dataDir, port)
	if err != nil {
		return nil, err
	}
	hf, err := hostfacts.New("", "")
	if err == nil {
		var exe string
		if exe, err = hf.Executable(pid); err == nil {
			s.pgCtl = filepath.Join(filepath.Dir(exe), "pg_ctl")
			_, err = os.Stat(s.pgCtl)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: pg_ctl beside the postmaster (pid %d): %v", why, pid, err)
	}
	return s, nil
}

// owned fills the data directory's owner and refuses an erplab that is
// neither root nor that owner.
func (s *localServer) owned(why string) error {
	st, err := os.Stat(s.dataDir)
	if err != nil {
		return fmt.Errorf("%s: the server's data directory %s is not visible here (%v): erplab restarts a server and mounts beside it only on this host", why, s.dataDir, errors.Unwrap(err))
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: %s: no owner", why, s.dataDir)
	}
	s.uid, s.gid, s.owner = sys.Uid, sys.Gid, strconv.FormatUint(uint64(sys.Uid), 10)
	if u, err := user.LookupId(s.owner); err == nil {
		s.owner = u.Username
	}
	if euid := os.Geteuid(); euid != 0 && uint32(euid) != s.uid {
		return fmt.Errorf("%s: the data directory %s is %s's: run erplab as root or as %s", why, s.dataDir, s.owner, s.owner)
	}
	return nil
}

// postmasterPID is the PID in dataDir's postmaster.pid (its first line),
// which must name port (its fourth line): the data directory is the
// DSN's server's.
func postmasterPID(why, dataDir string, port int) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("%s: %v: is the server running from %s?", why, err, dataDir)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, fmt.Errorf("%s: %s/postmaster.pid: %d lines, want at least 4", why, dataDir, len(lines))
	}
	pid, err1 := strconv.Atoi(strings.TrimSpace(lines[0]))
	p, err2 := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("%s: %s/postmaster.pid: %v", why, dataDir, err)
	}
	if p != port {
		return 0, fmt.Errorf("%s: %s/postmaster.pid names port %d, the --dsn server listens on %d: not the same server", why, dataDir, p, port)
	}
	return pid, nil
}

// byHand is the command that restarts s, for a line to run by hand.
func (s *localServer) byHand() string {
	return fmt.Sprintf("pg_ctl restart -D %s -m fast (as %s)", s.dataDir, s.owner)
}

// restart runs pg_ctl restart -D DATADIR -m fast -w as the data
// directory's owner (switching to it as root), the server's output to a
// log file of erplab's in the temporary directory, and waits until the
// DSN connects. Once pg_ctl has started, ctx no longer stops it: a
// restart cut short would leave the server down.
func (s *localServer) restart(ctx context.Context, out io.Writer) error {
	if err := s.openLog(); err != nil {
		return err
	}
	cmd := exec.Command(s.pgCtl, "restart", "-D", s.dataDir, "-m", "fast", "-w", "-t", strconv.Itoa(pgCtlWaitSeconds), "-l", s.log)
	cmd.Dir = "/"
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's Ctrl-C is erplab's
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = s.credential()
	}
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_ctl restart -D %s: %w: %s (server log: %s)", s.dataDir, err, lastLine(b.String()), s.log)
	}
	deadline := time.Now().Add(restartConnWait)
	for {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		conn, err := conninfo.Connect(cctx, s.dsn, "erplab-ab", nil)
		if err == nil {
			_ = conn.Close(cctx)
			cancel()
			fmt.Fprintf(out, "restarted the server of %s (pg_ctl restart -m fast; its output in %s)\n", s.dataDir, s.log)
			return nil
		}
		cancel()
		if time.Now().After(deadline) {
			return fmt.Errorf("the server of %s does not accept connections %s after pg_ctl restart: %s", s.dataDir, restartConnWait, conninfo.Describe(err))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// openLog makes s.log, the file pg_ctl -l appends the server's output
// to, once: a new file in the temporary directory, the owner's.
func (s *localServer) openLog() error {
	if s.log != "" {
		return nil
	}
	f, err := os.CreateTemp("", "erplab-pg_ctl-*.log")
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	defer f.Close()
	if os.Geteuid() == 0 {
		if err := f.Chown(int(s.uid), int(s.gid)); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
	}
	s.log = f.Name()
	return nil
}

// credential is the data directory owner's, with its groups.
func (s *localServer) credential() *syscall.Credential {
	c := &syscall.Credential{Uid: s.uid, Gid: s.gid}
	if u, err := user.LookupId(strconv.FormatUint(uint64(s.uid), 10)); err == nil {
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.ParseUint(id, 10, 32); err == nil {
					c.Groups = append(c.Groups, uint32(g))
				}
			}
		}
	}
	return c
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
