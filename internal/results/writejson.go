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
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode: %w", err)
	}
	if err := safefile.WriteNew(path, append(b, '\n'), perm); err != nil {
		return fmt.Errorf("results: %w", err) // err names the file
	}
	return nil
}

// ReplaceJSON is WriteJSON for a document the caller rewrites (a
// capacity document after every step; erplab pgbench's FILE.json, which
// every run replaces as pgbench replaces its logs): path may exist, as a
// regular file of this user only (safefile.Replace).
func ReplaceJSON(path string, v any, perm fs.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode: %w", err)
	}
	if err := safefile.Replace(path, append(b, '\n'), perm); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}
