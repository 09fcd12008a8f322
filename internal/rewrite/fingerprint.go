package rewrite

import (
	"strconv"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Fingerprint is pg_query.Fingerprint after CheckLimits: the hash (16 hex
// digits) that statements differing only in constants, parameter numbers
// and white space share, a *LimitError for a text the parser must not
// see, or the parser's error (a *SyntaxError for a text it rejects).
func Fingerprint(sql string) (string, error) {
	if err := CheckLimits(sql); err != nil {
		return "", err
	}
	fp, err := pg_query.Fingerprint(sql)
	if err != nil {
		return "", syntaxError(sql, err)
	}
	return fp, nil
}

// Normalize is pg_query.Normalize after CheckLimits: sql with every
// constant replaced by a $n parameter, a *LimitError for a text the
// parser must not see, or the parser's error (a *SyntaxError).
func Normalize(sql string) (string, error) {
	if err := CheckLimits(sql); err != nil {
		return "", err
	}
	out, err := pg_query.Normalize(sql)
	if err != nil {
		return "", syntaxError(sql, err)
	}
	return out, nil
}

// Fingerprint is pg_query.FingerprintToUInt64 of a text that passed
// Check: the fingerprint as a number, or the parser's error.
func (c *Checked) Fingerprint() (uint64, error) {
	return pg_query.FingerprintToUInt64(c.sql)
}

// MaxParam is the highest $n parameter number in sql (0 for none), by
// pg_query's scanner after CheckSize; the scanner's error for a text it
// rejects.
func MaxParam(sql string) (int, error) {
	if err := CheckSize(len(sql)); err != nil {
		return 0, err
	}
	sc, err := pg_query.Scan(sql)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range sc.Tokens {
		if t.Token != pg_query.Token_PARAM {
			continue
		}
		if k, err := strconv.Atoi(sql[t.Start+1 : t.End]); err == nil {
			n = max(n, k)
		}
	}
	return n, nil
}
