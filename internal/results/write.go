package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes the document as indented JSON to path atomically
// (path + ".tmp" in the same directory, synced, then renamed), creating
// the directory if needed. On any failure (a full disk: ENOSPC, EFBIG)
// the temp file is removed and path is untouched; the error names the
// file that failed.
func (d *Document) WriteFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results: create directory: %w", err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode: %w", err)
	}
	tmp := path + ".tmp"
	if err := writeSynced(tmp, append(b, '\n')); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("results: %w", err) // err names the file
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("results: rename to %s: %w", path, err)
	}
	return nil
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
