package pgreplay

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
)

// csvlog columns (PostgreSQL's "Using CSV-Format Log Output"): the user
// and the database of the session.
const (
	colUser     = 1
	colDatabase = 2
)

// rewriteLog writes the csvlog files logs, in order, to out with every
// non-empty user name replaced by user and database name by db (pgreplay
// connects as the user to the database each line names) and returns the
// number of records. A file that is not CSV fails with file:line:column.
func rewriteLog(logs []string, out, db, user string) (int, error) {
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("pgreplay bench: %w", err)
	}
	w := csv.NewWriter(f)
	n := 0
	for _, name := range logs {
		k, err := copyLog(w, name, db, user)
		n += k
		if err != nil {
			f.Close()
			return n, err
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return n, fmt.Errorf("pgreplay bench: %w", err)
	}
	if err := f.Close(); err != nil {
		return n, fmt.Errorf("pgreplay bench: %w", err)
	}
	return n, nil
}

func copyLog(w *csv.Writer, name, db, user string) (int, error) {
	in, err := os.Open(name)
	if err != nil {
		return 0, fmt.Errorf("pgreplay bench: %w", err)
	}
	defer in.Close()
	r := csv.NewReader(in)
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	n := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return n, fmt.Errorf("%s:%d:%d: not a csvlog: %w", name, pe.Line, pe.Column, pe.Err)
		}
		if err != nil {
			return n, fmt.Errorf("pgreplay bench: %s: %w", name, err)
		}
		if len(rec) <= colDatabase {
			line, col := r.FieldPos(0)
			return n, fmt.Errorf("%s:%d:%d: not a csvlog: %d fields", name, line, col, len(rec))
		}
		if rec[colUser] != "" {
			rec[colUser] = user
		}
		if rec[colDatabase] != "" {
			rec[colDatabase] = db
		}
		if err := w.Write(rec); err != nil {
			return n, fmt.Errorf("pgreplay bench: %w", err)
		}
		n++
	}
}
