package pgcluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Names inside the cluster directory.
const (
	// ownerFile is the marker holding the record entry's token: the proof,
	// for a later ReapOrphans, that erplab created the directory.
	ownerFile = "erplab.owner"
	// passFileName is the invoking user's 0600 passfile.
	passFileName = "pgpass"
	// reapKind is the leftover kind of cluster directories.
	reapKind = "pgcluster"
)

// randomHex returns 2n random hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// makeDir records, then creates, a fresh os.TempDir()/erplab-pg-<12 hex>
// directory with mode 0700, and sets c.dir, c.entry and c.info.
func (c *Cluster) makeDir() error {
	bin, err := filepath.EvalSymlinks(filepath.Join(c.binDir, "postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	c.info = reapInfo{ServerUID: os.Geteuid(), ServerGID: os.Getegid(), Postgres: bin}
	if c.cred != nil {
		c.info.ServerUID, c.info.ServerGID = int(c.cred.Uid), int(c.cred.Gid)
	}
	tmp, err := filepath.Abs(os.TempDir())
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	for range 5 {
		dir := filepath.Join(tmp, "erplab-pg-"+randomHex(6))
		e, err := c.rec.Add(reapKind, dir, c.info)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		err = os.Mkdir(dir, 0o700)
		if err == nil {
			c.dir, c.entry = dir, e
			return nil
		}
		_ = c.rec.Remove(e)
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("pgcluster: create cluster directory: %w", err)
		}
	}
	return fmt.Errorf("pgcluster: no fresh directory name in %s after 5 tries", tmp)
}

// lockDown gives the cluster directory its owner and mode, writes the
// marker and the passfile (password drawn here) and creates the data and
// socket directories. See the package doc for who can enter what.
func (c *Cluster) lockDown() error {
	mode := os.FileMode(0o700)
	if c.cred != nil {
		// The server's OS user must traverse the directory to reach data/
		// and sock/: its group gets x (no listing), others nothing.
		if err := os.Chown(c.dir, os.Geteuid(), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: chown %s: %w", c.dir, err)
		}
		mode = 0o710
	}
	if err := os.Chmod(c.dir, mode); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := c.writeFile(filepath.Join(c.dir, ownerFile), c.entry.Token+"\n", false); err != nil {
		return err
	}
	c.password = randomHex(16)
	if err := c.writeFile(c.passFile, "*:*:*:*:"+c.password+"\n", false); err != nil {
		return err
	}
	// data/ (empty: initdb fills it) and sock/ belong to the server.
	for _, d := range []string{c.dataDir, c.sockDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if c.cred != nil {
			if err := os.Chown(d, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fmt.Errorf("pgcluster: chown %s to %s: %w", d, c.osUser, err)
			}
		}
	}
	return nil
}

// writeFile creates path (which must not exist, and is not followed if a
// symlink) with mode 0600 and text; forServer gives it to the server's OS
// user.
func (c *Cluster) writeFile(path, text string, forServer bool) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	_, err = f.WriteString(text)
	if err == nil && forServer && c.cred != nil {
		err = f.Chown(int(c.cred.Uid), int(c.cred.Gid))
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("pgcluster: write %s: %w", path, err)
	}
	return nil
}
