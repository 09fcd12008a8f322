package techlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// bom is the UTF-8 byte-order mark 1C writes at the start of every file.
const bom = "\xEF\xBB\xBF"

// LineError is one piece of bad input: File (as given in Event.Where),
// Line and Column (1-based; the column counts characters, not bytes, and
// not the byte-order mark) and what is wrong there.
type LineError struct {
	File         string
	Line, Column int
	Msg          string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// rawLine is one physical line of a file: its text without the line
// end ("\n" or "\r\n") and, on the file's first line, without the
// byte-order mark; its number (1-based), the byte offset of its text in
// the file, its size with the line end, and whether a line end closed it.
type rawLine struct {
	text string
	num  int
	off  int64
	size int
	nl   bool
}

// col is the 1-based character column of byte index i in l.
func (l rawLine) col(i int) int { return utf8.RuneCountInString(l.text[:min(i, len(l.text))]) + 1 }

// lineReader yields a file's lines, with a stack of lines pushed back
// for the resynchronisation after a bad record.
type lineReader struct {
	r      *bufio.Reader
	data   []byte // read from here instead of r when r is nil
	num    int
	off    int64
	pushed []rawLine
}

// newLineReader reads r from its start; a byte-order mark is skipped.
func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// bytesLineReader reads data, whose first line is line number first
// at byte offset off.
func bytesLineReader(data []byte, first int, off int64) *lineReader {
	return &lineReader{data: data, num: first - 1, off: off}
}

// next returns the next line; ok is false at the end of the input, err
// is a read error.
func (lr *lineReader) next() (l rawLine, ok bool, err error) {
	if n := len(lr.pushed); n > 0 {
		l = lr.pushed[n-1]
		lr.pushed = lr.pushed[:n-1]
		return l, true, nil
	}
	s, err := lr.readLine()
	if err != nil && !errors.Is(err, io.EOF) {
		return rawLine{}, false, err
	}
	if s == "" {
		return rawLine{}, false, nil
	}
	lr.num++
	l = rawLine{num: lr.num, off: lr.off, size: len(s)}
	lr.off += int64(len(s))
	if lr.num == 1 && l.off == 0 && strings.HasPrefix(s, bom) {
		s = s[len(bom):]
		l.off += int64(len(bom))
		l.size -= len(bom)
	}
	if strings.HasSuffix(s, "\n") {
		l.nl = true
		s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
	}
	l.text = s
	return l, true, nil
}

// readLine is the next line with its "\n", as bufio's ReadString.
func (lr *lineReader) readLine() (string, error) {
	if lr.r != nil {
		return lr.r.ReadString('\n')
	}
	i := bytes.IndexByte(lr.data, '\n') + 1
	if i == 0 {
		i = len(lr.data)
	}
	s := string(lr.data[:i])
	lr.data = lr.data[i:]
	return s, nil
}

// push gives lines back, to be returned again in their order.
func (lr *lineReader) push(lines []rawLine) {
	for i := len(lines) - 1; i >= 0; i-- {
		lr.pushed = append(lr.pushed, lines[i])
	}
}

// isHeader reports whether s starts like an event: "mm:ss.uuuuuu-d".
func isHeader(s string) bool {
	if len(s) < 14 {
		return false
	}
	for i, c := range []byte(s[:14]) {
		var ok bool
		switch i {
		case 2:
			ok = c == ':'
		case 5:
			ok = c == '.'
		case 12:
			ok = c == '-'
		default:
			ok = c >= '0' && c <= '9'
		}
		if !ok {
			return false
		}
	}
	return true
}
