package workload_test

import (
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/workload"
	"github.com/erplab/erplab/internal/workload/smoke"
)

func TestOverrideMix(t *testing.T) {
	w := smoke.New()
	roles, err := workload.OverrideMix(w, "item_lookup=3, post_order=1")
	if err != nil {
		t.Fatal(err)
	}
	if len(roles) != 1 || roles[0].Mix["item_lookup"] != 3 || roles[0].Mix["post_order"] != 1 || len(roles[0].Mix) != 2 {
		t.Fatalf("roles %+v", roles)
	}
	for spec, want := range map[string]string{
		"nope=1":        "unknown operation",
		"item_lookup":   "want op=weight",
		"item_lookup=x": "must be a number",
		"item_lookup=0": "no operation has a positive weight",
	} {
		if _, err := workload.OverrideMix(w, spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", spec, err, want)
		}
	}
}

func TestValidateSmoke(t *testing.T) {
	if err := workload.Validate(smoke.New()); err != nil {
		t.Fatal(err)
	}
}
