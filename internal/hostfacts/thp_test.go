package hostfacts

import (
	"strconv"
	"strings"
	"testing"
)

// THPSettings on each fixture tree: mainline with per-size controls and
// shmem_enabled, the RHEL 6 directory, a tree without THP and one whose
// enabled and one per-size file are malformed beside sound ones.
func TestTHPSettings(t *testing.T) {
	s := open(t, "mthp").THPSettings()
	if s.RedHat || !strings.HasSuffix(s.Dir, "testdata/mthp/sys/kernel/mm/transparent_hugepage") {
		t.Errorf("dir %q redhat %v", s.Dir, s.RedHat)
	}
	if s.Enabled.Mode != "madvise" || s.Defrag.Mode != "madvise" || s.ShmemEnabled.Mode != "always" {
		t.Errorf("enabled %+v defrag %+v shmem %+v", s.Enabled, s.Defrag, s.ShmemEnabled)
	}
	var sizes []string
	for _, z := range s.Sizes {
		sizes = append(sizes, strconv.Itoa(z.KB)+"="+z.Mode)
	}
	if got := strings.Join(sizes, " "); got != "16=never 64=inherit 2048=always" {
		t.Errorf("sizes %s", got)
	}

	r := open(t, "rhel6").THPSettings()
	if !r.RedHat || r.Enabled.Mode != "always" || r.Defrag.Mode != "always" || !strings.Contains(r.Enabled.Path, "redhat_transparent_hugepage/enabled") {
		t.Errorf("rhel6: %+v", r)
	}
	if !r.ShmemEnabled.Absent() || len(r.Sizes) != 0 {
		t.Errorf("rhel6 shmem %+v sizes %v", r.ShmemEnabled, r.Sizes)
	}

	n := open(t, "nothp").THPSettings()
	if n.Dir != "" || !n.Enabled.Absent() || n.Enabled.Known() || !n.Defrag.Absent() {
		t.Errorf("nothp: %+v", n)
	}

	m := open(t, "malformed").THPSettings()
	if m.Enabled.Known() || m.Enabled.Absent() || !strings.Contains(m.Enabled.Err.Error(), "transparent_hugepage/enabled") {
		t.Errorf("malformed enabled %+v %v", m.Enabled, m.Enabled.Err)
	}
	if m.Defrag.Mode != "never" || m.ShmemEnabled.Mode != "never" {
		t.Errorf("sound files beside a malformed one: defrag %+v shmem %+v", m.Defrag, m.ShmemEnabled)
	}
	if len(m.Sizes) != 1 || m.Sizes[0].KB != 64 || m.Sizes[0].Known() || !strings.Contains(m.Sizes[0].Err.Error(), "hugepages-64kB/enabled") {
		t.Errorf("malformed size %+v", m.Sizes)
	}
}
