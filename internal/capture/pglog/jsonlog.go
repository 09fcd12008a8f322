package pglog

import (
	"encoding/json"
	"fmt"
)

// jsonReader reads a jsonlog: one JSON object per line.
type jsonReader struct {
	l    *lines
	z    *zones
	good int64
}

func (j *jsonReader) parsed() int64 { return j.good }

// jsonLine holds the jsonlog keys used; a key is absent when empty.
type jsonLine struct {
	Timestamp string `json:"timestamp"`
	User      string `json:"user"`
	DB        string `json:"dbname"`
	PID       int32  `json:"pid"`
	Session   string `json:"session_id"`
	Severity  string `json:"error_severity"`
	State     string `json:"state_code"`
	Message   string `json:"message"`
	Detail    string `json:"detail"`
	Statement string `json:"statement"`
	App       string `json:"application_name"`
	Backend   string `json:"backend_type"`
}

func (j *jsonReader) next() (*record, *badLine, error) {
	line, ok, err := j.l.next()
	if err != nil || !ok {
		return nil, nil, err
	}
	if j.l.cut {
		return nil, &badLine{j.l.n, "the last line is cut (no newline at the end of the file)"}, nil
	}
	var v jsonLine
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		return nil, &badLine{j.l.n, fmt.Sprintf("not a jsonlog line: %v", err)}, nil
	}
	t, err := j.z.parseTime(v.Timestamp)
	if err != nil {
		return nil, &badLine{j.l.n, err.Error()}, nil
	}
	if !isSeverity(v.Severity) {
		return nil, &badLine{j.l.n, fmt.Sprintf("severity %q: lc_messages must be 'C' (English)", v.Severity)}, nil
	}
	j.good++
	return &record{at: j.l.at(j.l.n), time: t, pid: v.PID, session: v.Session, user: v.User, db: v.DB,
		app: v.App, backend: v.Backend, severity: v.Severity, state: v.State,
		message: v.Message, detail: v.Detail, stmt: v.Statement}, nil, nil
}
