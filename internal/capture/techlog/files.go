package techlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// jfile is one journal file: its path, its name in messages and
// Event.Where ("rphost_<pid>/YYMMDDHH.log") and the hour its name gives
// (µs since the epoch in the journal's zone).
type jfile struct {
	path, where string
	hour        int64
}

// findFiles lists the journal files under paths, ordered by hour and
// name. A path is a journal directory (process folders such as
// rphost_<pid> under it), one process folder, or one file. Files whose
// name is not YYMMDDHH.log are not journal files and are left alone.
func findFiles(paths []string, loc *time.Location) ([]jfile, error) {
	var fs []jfile
	for _, p := range paths {
		found, err := filesUnder(p, loc)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no journal files (rphost_<pid>/YYMMDDHH.log) there", p)
		}
		fs = append(fs, found...)
	}
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].hour != fs[j].hour {
			return fs[i].hour < fs[j].hour
		}
		return fs[i].where < fs[j].where
	})
	return fs, nil
}

// filesUnder lists the journal files of one path.
func filesUnder(p string, loc *time.Location) ([]jfile, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		h, ok := hourOf(filepath.Base(p), loc)
		if !ok {
			return nil, fmt.Errorf("%s: not a journal file (YYMMDDHH.log)", p)
		}
		return []jfile{{path: p, where: filepath.Join(filepath.Base(filepath.Dir(p)), filepath.Base(p)), hour: h}}, nil
	}
	fs, err := hourFiles(p, loc)
	if err != nil || len(fs) > 0 {
		return fs, err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() {
			sub, err := hourFiles(filepath.Join(p, e.Name()), loc)
			if err != nil {
				return nil, err
			}
			fs = append(fs, sub...)
		}
	}
	return fs, nil
}

// hourFiles lists the YYMMDDHH.log files directly in dir.
func hourFiles(dir string, loc *time.Location) ([]jfile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var fs []jfile
	for _, e := range ents {
		if h, ok := hourOf(e.Name(), loc); ok && e.Type().IsRegular() {
			fs = append(fs, jfile{path: filepath.Join(dir, e.Name()), where: filepath.Join(filepath.Base(dir), e.Name()), hour: h})
		}
	}
	return fs, nil
}

// hourOf reads a file name YYMMDDHH.log: the start of that hour in loc
// (µs since the epoch).
func hourOf(name string, loc *time.Location) (int64, bool) {
	if len(name) != len("YYMMDDHH.log") || filepath.Ext(name) != ".log" {
		return 0, false
	}
	var f [4]int
	for i := range f {
		n, err := strconv.Atoi(name[2*i : 2*i+2])
		if err != nil || name[2*i] == '+' || name[2*i] == '-' {
			return 0, false
		}
		f[i] = n
	}
	t := time.Date(2000+f[0], time.Month(f[1]), f[2], f[3], 0, 0, 0, loc)
	if t.Month() != time.Month(f[1]) || t.Day() != f[2] || t.Hour() != f[3] {
		return 0, false
	}
	return t.UnixMicro(), true
}
