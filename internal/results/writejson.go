package results

import (
	"encoding/json"
	"fmt"
	"io/fs"

	"github.com/erplab/erplab/internal/safefile"
)

// WriteJSON writes v as indented JSON to a new file at path, with mode
// perm, atomically (safefile.WriteNew: a private temporary file beside
// it, fsynced, published only if path does not exist), so a reader or a
// crash sees no file or the whole one, and a file or symbolic link
// planted at path is refused. On any failure (a full disk: ENOSPC,
// EFBIG) nothing is left behind. Errors name the file and wrap the cause.
func WriteJSON(path string, v any, perm fs.FileMode) error {
	return writeJSON(v, func(b []byte) error { return safefile.WriteNew(path, b, perm) })
}

// WriteJSONIn is WriteJSON for the new file name in the directory dir,
// held open (safefile.Root): nothing is resolved through dir's path.
func WriteJSONIn(dir *safefile.Root, name string, v any, perm fs.FileMode) error {
	return writeJSON(v, func(b []byte) error { return dir.WriteNew(name, b, perm) })
}

// writeJSON encodes v, indented with a final newline, and writes it with
// write.
func writeJSON(v any, write func([]byte) error) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode: %w", err)
	}
	if err := write(append(b, '\n')); err != nil {
		return fmt.Errorf("results: %w", err) // err names the file
	}
	return nil
}

// ReplaceJSON is WriteJSON for a document the caller rewrites (a
// capacity document after every step; erplab pgbench's FILE.json, which
// every run replaces as pgbench replaces its logs): path may exist, as a
// regular file of this user only (safefile.Replace).
func ReplaceJSON(path string, v any, perm fs.FileMode) error {
	return writeJSON(v, func(b []byte) error { return safefile.Replace(path, b, perm) })
}

// ReplaceJSONIn is ReplaceJSON for name in the directory dir, held open
// (safefile.Root).
func ReplaceJSONIn(dir *safefile.Root, name string, v any, perm fs.FileMode) error {
	return writeJSON(v, func(b []byte) error { return dir.Replace(name, b, perm) })
}
