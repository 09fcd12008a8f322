package doctor

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/sampler"
)

// thinnedCopy writes pileUp with its observations' samples up to upTo
// seconds folded into one coarse sample (sampler.FoldSamples, as run
// --soak thins them past its horizon) and returns its path.
func thinnedCopy(t *testing.T, upTo float64) string {
	t.Helper()
	b, err := os.ReadFile(pileUp)
	if err != nil {
		t.Fatal(err)
	}
	var doc, extra map[string]json.RawMessage
	var obs sampler.Observations
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(doc["extra"], &extra); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(extra["observations"], &obs); err != nil {
		t.Fatal(err)
	}
	k := 0
	for k < len(obs.Series) && obs.Series[k].T <= upTo {
		k++
	}
	obs.Series = append([]sampler.Sample{sampler.FoldSamples(0, obs.Series[:k])}, obs.Series[k:]...)
	extra["observations"], _ = json.Marshal(obs)
	doc["extra"], _ = json.Marshal(extra)
	out, _ := json.Marshal(doc)
	path := filepath.Join(t.TempDir(), "thinned.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestResultsWindowThinnedObservations: with the 18 quiet samples before
// the lock queue folded into one coarse sample, the mean active sessions
// before the window is still that of every sample (6.39; within the
// rounding of the coarse sample's mean), not 15.3 as it would be if the
// coarse sample counted once.
func TestResultsWindowThinnedObservations(t *testing.T) {
	full := runWindow(t, pileUp, "68s", 13*time.Second).Find("window-waits")
	thin := runWindow(t, thinnedCopy(t, 35), "68s", 13*time.Second).Find("window-waits")
	if full == nil || thin == nil {
		t.Fatalf("window-waits: %+v, %+v", full, thin)
	}
	a, b := full.Metrics["active_before"], thin.Metrics["active_before"]
	if math.Abs(a-6.39) > 0.01 || math.Abs(b-a) > 0.5 {
		t.Fatalf("active sessions before the window: %.2f thinned, %.2f from every sample (want 6.39, within 0.5)", b, a)
	}
}
