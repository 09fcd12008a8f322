package results

import (
	"io/fs"

	"github.com/erplab/erplab/internal/safefile"
)

// DefaultPerm is the mode of the results files erplab writes (documents,
// streams, logs beside them) unless the user asks for another with
// --out-mode: results can hold query text, host and server facts.
const DefaultPerm fs.FileMode = 0o600

// WriteFile writes the document as indented JSON to a new file at path
// with mode perm (see WriteJSON): an existing file or a symbolic link
// at path is refused, never overwritten or followed.
func (d *Document) WriteFile(path string, perm fs.FileMode) error {
	return WriteJSON(path, d, perm)
}

// WriteFileIn is WriteFile for the new file name in the directory dir,
// held open (safefile.Root): nothing is resolved through dir's path.
func (d *Document) WriteFileIn(dir *safefile.Root, name string, perm fs.FileMode) error {
	return WriteJSONIn(dir, name, d, perm)
}
