package doctor

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/sampler"
)

// profileCase is testdata/profile/<case>/case.json: a profile summary as
// erplab records it (extra.profile), or why none was taken, and the
// golden case of testdata/doctor whose host facts it runs on ("" for
// none).
type profileCase struct {
	About       string           `json:"about"`
	Host        string           `json:"host,omitempty"`
	Unavailable string           `json:"unavailable,omitempty"`
	Profile     *profile.Summary `json:"profile,omitempty"`
}

// TestProfileGolden runs the profile-* checks on every case of
// testdata/profile and compares the findings with its expected.json
// (-update rewrites them).
func TestProfileGolden(t *testing.T) {
	const dir = "testdata/profile"
	cases, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 4 {
		t.Fatalf("%d profile cases", len(cases))
	}
	for _, c := range cases {
		cdir := filepath.Join(dir, c.Name())
		t.Run(c.Name(), func(t *testing.T) {
			var pc profileCase
			if err := readJSON(filepath.Join(cdir, "case.json"), &pc); err != nil {
				t.Fatal(err)
			}
			e := &env{opts: Options{Host: sampler.HostOff, Profile: ProfileFacts{Summary: pc.Profile, Unavailable: pc.Unavailable}}}
			if pc.Host != "" {
				he, err := envFromFixture(filepath.Join(goldenDir, pc.Host))
				if err != nil {
					t.Fatal(err)
				}
				e.opts.Host, e.opts.ProcRoot, e.opts.SysRoot, e.host, e.hostWhy = he.opts.Host, he.opts.ProcRoot, he.opts.SysRoot, he.host, he.hostWhy
			} else {
				e.readHost()
			}
			e.set = map[string]setting{}
			if err := readJSON(filepath.Join(goldenDir, "settings.json"), &e.set); err != nil {
				t.Fatal(err)
			}
			rep, err := e.report(context.Background(), profileChecks())
			if err != nil {
				t.Fatal(err)
			}
			got := goldenReport{HostChecked: rep.HostChecked, HostNote: rep.HostNote, Worst: rep.Worst}
			for _, f := range rep.Findings {
				f.Why, f.Sources = "", nil
				got.Findings = append(got.Findings, f)
			}
			checkGolden(t, filepath.Join(cdir, "expected.json"), got)
		})
	}
}
