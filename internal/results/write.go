package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes the document as indented JSON to path atomically
// (a temp file in the same directory, then rename), creating the
// directory if needed.
func (d *Document) WriteFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results: create directory: %w", err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("results: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("results: rename to %s: %w", path, err)
	}
	return nil
}
