package pglog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// lines reads one file's physical lines, counting them.
type lines struct {
	name string
	br   *bufio.Reader
	n    int64 // lines read
	// cut is set when the last line had no newline (a file cut while
	// being written, or copied mid-write).
	cut bool
	// back is a line pushed back by unread.
	back    string
	hasBack bool
}

// openFile opens name, decompressing it when it is gzip. close closes it.
func openFile(name string) (l *lines, close func() error, err error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(f, 256<<10)
	magic, _ := br.Peek(2)
	if bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			_ = f.Close()
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		br = bufio.NewReaderSize(zr, 256<<10)
	}
	return &lines{name: name, br: br}, f.Close, nil
}

// next returns the next line without its newline; ok false at the end.
// A last line without a newline is returned with l.cut set. Errors are
// read errors (a corrupt gzip file among them).
func (l *lines) next() (line string, ok bool, err error) {
	if l.hasBack {
		l.hasBack = false
		l.n++
		return l.back, true, nil
	}
	s, err := l.br.ReadString('\n')
	switch {
	case err == nil:
		l.n++
		return strings.TrimSuffix(s, "\n"), true, nil // a CR stays: it may be in a statement
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if s == "" {
			return "", false, nil
		}
		l.n++
		l.cut = true
		return s, true, nil
	}
	return "", false, fmt.Errorf("%s: after line %d: %w", l.name, l.n, err)
}

// unread pushes line back: the next call of next returns it again.
func (l *lines) unread(line string) {
	l.back, l.hasBack = line, true
	l.n--
}

// at is "file:line" of line n.
func (l *lines) at(n int64) string { return fmt.Sprintf("%s:%d", l.name, n) }

// detect names the format of a file from its name (.csv, .json, before
// an optional .gz) or its first line.
func detect(name, first string) Format {
	switch filepath.Ext(strings.TrimSuffix(name, ".gz")) {
	case ".csv":
		return FormatCSV
	case ".json":
		return FormatJSON
	}
	switch {
	case strings.HasPrefix(first, "{"):
		return FormatJSON
	case csvStart(first):
		return FormatCSV
	}
	return FormatStderr
}

// csvStart reports whether line begins like a csvlog record: a %m time,
// its zone, a comma.
func csvStart(line string) bool {
	if len(line) < len(timeLayout)+3 || line[4] != '-' || line[7] != '-' || line[10] != ' ' || line[13] != ':' || line[19] != '.' {
		return false
	}
	zone, _, ok := strings.Cut(line[len(timeLayout)+1:], ",")
	return ok && zone != "" && !strings.Contains(zone, " ")
}
