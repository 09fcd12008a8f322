package rewrite

import pg_query "github.com/pganalyze/pg_query_go/v6"

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
