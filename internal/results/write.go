package results

import (
	"os"
)

// WriteFile writes the document as indented JSON to path atomically
// (path + ".tmp" in the same directory, synced, then renamed), creating
// the directory if needed. On any failure (a full disk: ENOSPC, EFBIG)
// the temp file is removed and path is untouched; the error names the
// file that failed.
func (d *Document) WriteFile(path string) error {
	return WriteJSON(path, d)
}

// writeSynced writes b to a new file at path and fsyncs it, so that a
// full disk shows as an error here rather than as a short file later.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
