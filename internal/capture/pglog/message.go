package pglog

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// msgKind is what a LOG message of a client session says.
type msgKind int

const (
	msgOther       msgKind = iota
	msgReceived            // connection received: host=...
	msgAuthorized          // connection authorized: user=... database=... application_name=...
	msgReplication         // replication connection authorized: ...
	msgDisconnect          // disconnection: session time: ...
	msgStatement           // statement: SQL (log_statement, at the start)
	msgExecute             // execute NAME: SQL (log_statement, at the start)
	msgDuration            // duration: D ms, alone or with the statement (at the end)
	msgFastPath            // fastpath function call: ...
)

// message is a parsed LOG message.
type message struct {
	kind  msgKind
	dur   int64  // msgDuration: µs
	phase string // "statement", "parse", "bind", "execute"; "" for a bare duration
	name  string // parse, bind, execute: the statement's name, "" when unnamed
	fetch bool   // "execute fetch from": a portal executed again
	sql   string
	rest  string // msgAuthorized: what follows "connection authorized: "
}

// parseMessage reads a LOG message; errors are for a message that starts
// like one of the kinds but does not parse.
func parseMessage(m string) (message, error) {
	for _, p := range []struct {
		prefix string
		kind   msgKind
	}{
		{"connection received: ", msgReceived},
		{"connection authorized: ", msgAuthorized},
		{"replication connection authorized: ", msgReplication},
		{"disconnection: ", msgDisconnect},
		{"fastpath function call: ", msgFastPath},
	} {
		if rest, ok := strings.CutPrefix(m, p.prefix); ok {
			return message{kind: p.kind, rest: rest}, nil
		}
	}
	if sql, ok := strings.CutPrefix(m, "statement: "); ok {
		return message{kind: msgStatement, phase: "statement", sql: sql}, nil
	}
	if strings.HasPrefix(m, "execute ") {
		msg, err := parsePhase(m)
		msg.kind = msgExecute
		return msg, err
	}
	if rest, ok := strings.CutPrefix(m, "duration: "); ok {
		return parseDuration(rest)
	}
	return message{kind: msgOther}, nil
}

// parseDuration reads "D ms" and, after two spaces, the statement.
func parseDuration(s string) (message, error) {
	num, rest, ok := strings.Cut(s, " ms")
	ms, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || ms < 0 {
		return message{}, fmt.Errorf("a duration that is not \"D ms\": %.40q", s)
	}
	msg := message{kind: msgDuration}
	if rest != "" {
		phase, err := parsePhase(strings.TrimPrefix(rest, "  "))
		if err != nil {
			return message{}, err
		}
		msg = phase
		msg.kind = msgDuration
	}
	msg.dur = int64(math.Round(ms * 1000))
	return msg, nil
}

// parsePhase reads "statement: SQL", "parse NAME: SQL", "bind NAME[/PORTAL]: SQL",
// "execute [fetch from ]NAME[/PORTAL]: SQL".
func parsePhase(s string) (message, error) {
	if sql, ok := strings.CutPrefix(s, "statement: "); ok {
		return message{phase: "statement", sql: sql}, nil
	}
	phase, rest, _ := strings.Cut(s, " ")
	if phase != "parse" && phase != "bind" && phase != "execute" {
		return message{}, fmt.Errorf("not statement, parse, bind or execute after the duration: %.40q", s)
	}
	msg := message{phase: phase}
	if phase == "execute" {
		rest, msg.fetch = strings.CutPrefix(rest, "fetch from ")
	}
	name, sql, ok := strings.Cut(rest, ": ")
	if !ok {
		return message{}, fmt.Errorf("%s without a statement name: %.40q", phase, s)
	}
	name, _, _ = strings.Cut(name, "/") // the portal's name is not kept
	if name != "<unnamed>" {
		msg.name = name
	}
	msg.sql = sql
	return msg, nil
}

// parseParams reads the detail "parameters: $1 = '...', $2 = NULL" into
// text values (nil for NULL). A detail that is not about parameters gives
// none.
func parseParams(detail string) ([][]byte, error) {
	s, ok := strings.CutPrefix(detail, "parameters: ")
	if !ok {
		return nil, nil
	}
	var out [][]byte
	for i := 1; ; i++ {
		rest, ok := strings.CutPrefix(s, fmt.Sprintf("$%d = ", i))
		if !ok {
			return nil, fmt.Errorf("parameters: no $%d where expected", i)
		}
		v, rest, err := paramValue(rest)
		if err != nil {
			return nil, fmt.Errorf("parameters: $%d: %w", i, err)
		}
		out = append(out, v)
		if rest == "" {
			return out, nil
		}
		if s, ok = strings.CutPrefix(rest, ", "); !ok {
			return nil, fmt.Errorf("parameters: text after $%d", i)
		}
	}
}

// paramValue reads NULL or a quoted value (a quote doubled inside).
func paramValue(s string) ([]byte, string, error) {
	if rest, ok := strings.CutPrefix(s, "NULL"); ok {
		return nil, rest, nil
	}
	if !strings.HasPrefix(s, "'") {
		return nil, "", errors.New("neither NULL nor a quoted value")
	}
	v := []byte{}
	s = s[1:]
	for {
		i := strings.IndexByte(s, '\'')
		if i < 0 {
			return nil, "", errors.New("a quoted value not closed")
		}
		v = append(v, s[:i]...)
		if i+1 < len(s) && s[i+1] == '\'' {
			v = append(v, '\'')
			s = s[i+2:]
			continue
		}
		return v, s[i+1:], nil
	}
}

// authorized reads "user=U database=D application_name=A" and what may
// follow (" SSL enabled (...)", " GSS (...)") into startup parameters.
func authorized(s string) map[string]string {
	for _, tail := range []string{" SSL enabled (", " GSS ("} {
		if i := strings.LastIndex(s, tail); i >= 0 {
			s = s[:i]
		}
	}
	out := map[string]string{}
	s, app, hasApp := strings.Cut(s, " application_name=")
	if hasApp {
		out["application_name"] = app
	}
	s, db, hasDB := strings.Cut(s, " database=")
	if hasDB {
		out["database"] = db
	}
	if user, ok := strings.CutPrefix(s, "user="); ok {
		out["user"] = user
	}
	return out
}
