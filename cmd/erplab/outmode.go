package main

import (
	"fmt"
	"io/fs"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/results"
)

// outModeValue is --out-mode: the permission bits of the results files,
// in octal.
type outModeValue struct{ m *fs.FileMode }

func (v outModeValue) String() string { return fmt.Sprintf("%04o", uint32(*v.m)) }
func (v outModeValue) Type() string   { return "mode" }

func (v outModeValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o777 || n&0o600 != 0o600 {
		return fmt.Errorf("want octal permission bits that let the owner read and write, such as 0600 or 0644")
	}
	*v.m = fs.FileMode(n)
	return nil
}

// addOutModeFlag registers --out-mode into m (default
// results.DefaultPerm, 0600) on the commands that write results or pages.
func addOutModeFlag(fl *pflag.FlagSet, m *fs.FileMode) {
	*m = results.DefaultPerm
	fl.Var(outModeValue{m}, "out-mode", "permission bits of the files written (results, pages), octal, less the umask (e.g. 0644 lets other users read them)")
}
