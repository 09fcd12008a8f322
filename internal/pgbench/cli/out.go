package cli

import (
	"os"
	"strings"
)

// resultsPlace is where a run's results document goes, from
// ERPLAB_PGBENCH_OUT (Program.Out).
type resultsPlace struct {
	// Off: no document, no stream ("none" or /dev/null).
	Off bool
	// Dir is the directory of the time-stamped <time>-pgbench.json (an
	// existing directory, or a value ending in "/", made when missing);
	// "" with File "" = ./erplab-results.
	Dir string
	// File is the document's path (".json" added when missing; the
	// stream is beside it, .jsonl); an existing regular file is
	// replaced, as pgbench's -l logs are.
	File string
}

// placeOf interprets ERPLAB_PGBENCH_OUT's value v:
//
//	""            ./erplab-results/<YYYYMMDD-HHMMSS>-pgbench.json (+ .jsonl)
//	none          no results document (nor stream); /dev/null means the same
//	DIR/ or DIR   an existing directory, or a value ending in "/":
//	              DIR/<YYYYMMDD-HHMMSS>-pgbench.json, made when missing
//	FILE          FILE.json (FILE when it ends in .json) and FILE.jsonl,
//	              replaced on every run when they are regular files
func placeOf(v string) resultsPlace {
	switch {
	case v == "":
		return resultsPlace{}
	case v == "none" || v == os.DevNull:
		return resultsPlace{Off: true}
	case strings.HasSuffix(v, "/"):
		return resultsPlace{Dir: v}
	}
	if st, err := os.Stat(v); err == nil && st.IsDir() {
		return resultsPlace{Dir: v}
	}
	return resultsPlace{File: v}
}
