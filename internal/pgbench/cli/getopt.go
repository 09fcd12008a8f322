package cli

import (
	"fmt"
	"strings"
)

// argKind says whether an option takes an argument (getopt_long's has_arg;
// pgbench has no optional arguments).
type argKind uint8

const (
	noArg argKind = iota
	requiredArg
)

// longOpt is one entry of getopt_long's option table: a long name and the
// option it stands for (a short letter, or a code above 255 for long-only
// options).
type longOpt struct {
	name string
	arg  argKind
	code int
}

// parsedOpt is one option as getopt_long returns it, in command-line
// order.
type parsedOpt struct {
	code int    // short letter or long-only code
	name string // as written, for messages: "-c" or "--client"
	arg  string
}

// getoptError is a command-line syntax error, worded as glibc's getopt
// prints it (without the program name).
type getoptError struct{ msg string }

func (e *getoptError) Error() string { return e.msg }

// getoptLong parses args (without the program name) like glibc's
// getopt_long with the default (permuting) ordering: options and
// operands may be mixed, "--" ends the options, "-" is an operand;
// short options cluster ("-nS", "-c3"), a required argument is the rest
// of the cluster or the next word; long options take "--name=value" or
// "--name value" and may be abbreviated to any unambiguous prefix (an
// exact match wins). It returns the options in order and the operands in
// order, or the first error.
func getoptLong(args []string, shorts string, longs []longOpt) ([]parsedOpt, []string, error) {
	var opts []parsedOpt
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			return opts, operands, nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			lo, err := findLong(name, longs)
			if err != nil {
				return nil, nil, err
			}
			p := parsedOpt{code: lo.code, name: "--" + lo.name}
			switch {
			case lo.arg == noArg && hasVal:
				return nil, nil, &getoptError{fmt.Sprintf("option '--%s' doesn't allow an argument", lo.name)}
			case lo.arg == requiredArg && hasVal:
				p.arg = val
			case lo.arg == requiredArg:
				if i+1 >= len(args) {
					return nil, nil, &getoptError{fmt.Sprintf("option '--%s' requires an argument", lo.name)}
				}
				i++
				p.arg = args[i]
			}
			opts = append(opts, p)
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				k := strings.IndexByte(shorts, c)
				if c == ':' || k < 0 {
					return nil, nil, &getoptError{fmt.Sprintf("invalid option -- '%c'", c)}
				}
				p := parsedOpt{code: int(c), name: "-" + string(c)}
				if k+1 < len(shorts) && shorts[k+1] == ':' {
					switch {
					case j+1 < len(a):
						p.arg = a[j+1:]
					case i+1 < len(args):
						i++
						p.arg = args[i]
					default:
						return nil, nil, &getoptError{fmt.Sprintf("option requires an argument -- '%c'", c)}
					}
					opts = append(opts, p)
					break
				}
				opts = append(opts, p)
			}
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, nil
}

// findLong finds the long option name abbreviates: an exact match, else
// the only option it is a prefix of (or several that all mean the same
// option, as glibc accepts).
func findLong(name string, longs []longOpt) (longOpt, error) {
	var matches []longOpt
	for _, lo := range longs {
		if lo.name == name {
			return lo, nil
		}
		if name != "" && strings.HasPrefix(lo.name, name) {
			matches = append(matches, lo)
		}
	}
	if len(matches) == 0 {
		return longOpt{}, &getoptError{fmt.Sprintf("unrecognized option '--%s'", name)}
	}
	for _, m := range matches[1:] {
		if m.code != matches[0].code || m.arg != matches[0].arg {
			names := make([]string, len(matches))
			for i, m := range matches {
				names[i] = "'--" + m.name + "'"
			}
			return longOpt{}, &getoptError{fmt.Sprintf("option '--%s' is ambiguous; possibilities: %s", name, strings.Join(names, " "))}
		}
	}
	return matches[0], nil
}
