package script

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// Strerror words err as C's strerror(3) (glibc) words the errno it holds,
// as pgbench's and libpq's %m do: "No such file or directory". Go's errno
// texts are glibc's with the first letter lowered (the syscall package's
// mkerrors.sh), so the first letter is raised back. An err without an
// errno is its own text.
func Strerror(err error) string {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	s := errno.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// OSError is an operating-system error worded by Strerror; it unwraps to
// the error.
type OSError struct{ Err error }

func (e *OSError) Error() string { return Strerror(e.Err) }
func (e *OSError) Unwrap() error { return e.Err }
