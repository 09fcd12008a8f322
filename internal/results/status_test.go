package results

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStatus(t *testing.T) {
	s := StatusAborted.Because("3 statements failed: a: b")
	if s != "aborted: 3 statements failed: a: b" || s.Kind() != StatusAborted {
		t.Errorf("Because: %q, kind %q", s, s.Kind())
	}
	if why, ok := s.Reason(StatusAborted); !ok || why != "3 statements failed: a: b" {
		t.Errorf("Reason(aborted) = %q, %v", why, ok)
	}
	if _, ok := s.Reason(StatusLost); ok {
		t.Error("an aborted status has a lost reason")
	}
	if StatusCompleted.Kind() != StatusCompleted {
		t.Errorf("completed's kind is %q", StatusCompleted.Kind())
	}
	if _, ok := StatusInterrupted.Reason(StatusInterrupted); ok {
		t.Error("interrupted has a reason")
	}
	if p := StatusPartial.Because("segment 3/3 missing; segment 1/3 late start: began 3s after --start-at"); p.Kind() != StatusPartial {
		t.Errorf("partial's kind is %q", p.Kind())
	}
}

// The typed status is the JSON string it always was, both ways.
func TestStatusJSON(t *testing.T) {
	b, err := json.Marshal(Document{Status: StatusLost.Because("no operation succeeded")})
	if err != nil || !strings.Contains(string(b), `"status":"lost: no operation succeeded"`) {
		t.Fatalf("%s %v", b, err)
	}
	var d Document
	if err := json.Unmarshal([]byte(`{"status":"interrupted"}`), &d); err != nil || d.Status != StatusInterrupted {
		t.Fatalf("%q %v", d.Status, err)
	}
}
