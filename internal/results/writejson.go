package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// WriteJSON writes v as indented JSON to path atomically: to path.tmp,
// fsynced, then renamed over path, so a reader (or a crash) sees either
// the previous file or the new one, never a part. The directory is
// created when missing. Errors name the file and wrap the cause.
func WriteJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results: create directory: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
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
