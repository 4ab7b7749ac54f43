package config

import (
	"fmt"
	"strings"
)

// UnknownEnv warns about each variable among names that looks like a
// setting but is none: its name starts with HYPERPLANE_, in any case, and
// it is neither a key's variable, nor HYPERPLANE_CONFIG, nor one of the
// test suites' (HYPERPLANE_TEST_*, HYPERPLANE_E2E_*). Load ignores such a
// variable, so it is most likely a misspelling; each warning names it and
// the variable nearest to it by edit distance, when one is near enough to
// be the one meant. names may be NAME=VALUE pairs, as os.Environ gives
// them; values are read only through getenv, and a variable it gives no
// value is skipped, as Load skips an empty one. UnknownEnv prints
// nothing: the caller shows the warnings, in the order of names.
func UnknownEnv(names []string, getenv func(string) string) []string {
	known := []string{configEnv}
	for _, k := range keys() {
		known = append(known, k.env)
	}
	var warnings []string
	seen := make(map[string]bool)
	for _, name := range names {
		name, _, _ = strings.Cut(name, "=")
		upper := strings.ToUpper(name)
		if !strings.HasPrefix(upper, envPrefix) || seen[name] || getenv(name) == "" || isKnownEnv(name, known) {
			continue
		}
		seen[name] = true
		warnings = append(warnings, unknownEnvWarning(name, known))
	}
	return warnings
}

// isKnownEnv reports whether Load reads the variable name (it is among
// known), or the test suites do: the S3 and NATS servers of
// snapshot/s3test and e2e, which the binary never reads.
func isKnownEnv(name string, known []string) bool {
	if strings.HasPrefix(name, envPrefix+"TEST_") || strings.HasPrefix(name, envPrefix+"E2E_") {
		return true
	}
	for _, k := range known {
		if name == k {
			return true
		}
	}
	return false
}

// unknownEnvWarning names the variable name, which is not a setting, and
// what was probably meant: the same name in upper case; or the variables
// that end as it does after HYPERPLANE_ (the section left out:
// HYPERPLANE_SASL_PASSWORD); or else the nearest by edit distance if it
// is near enough, at most a third of the length of the part after
// HYPERPLANE_ and at least 2 edits, so that a dropped letter or two
// swapped ones are caught and a variable of another program is not given
// a far-fetched suggestion.
func unknownEnvWarning(name string, known []string) string {
	upper := strings.ToUpper(name)
	rest := strings.TrimPrefix(upper, envPrefix)
	var ends []string
	for _, k := range known {
		if k == upper {
			return fmt.Sprintf("%s is not a setting and is ignored: variable names are upper case, did you mean %s?", name, k)
		}
		if rest != "" && strings.HasSuffix(k, "_"+rest) {
			ends = append(ends, k)
		}
	}
	if len(ends) > 0 {
		return fmt.Sprintf("%s is not a setting and is ignored: did you mean %s?", name, strings.Join(ends, " or "))
	}
	if best, ok := nearest(upper, known, len(rest)); ok {
		return fmt.Sprintf("%s is not a setting and is ignored: did you mean %s?", name, best)
	}
	return fmt.Sprintf("%s is not a setting and is ignored (hyperplane config --defaults lists every variable)", name)
}

// Nearest returns the name among known nearest to name by edit distance,
// if it is near enough to be the one meant, as for a key's flag: a
// command's flags of its own name their typos with it.
func Nearest(name string, known []string) (string, bool) {
	return nearest(name, known, len(name))
}

// nearest returns the name among known nearest to name by edit distance,
// if it is near enough to be the one meant: at most a third of size, the
// length of the part of name that is the user's own, and at least 2 edits,
// so that a dropped letter or two swapped ones are caught and a name of
// something else is not given a far-fetched suggestion.
func nearest(name string, known []string, size int) (string, bool) {
	best, bestDist := "", -1
	for _, k := range known {
		if d := editDistance(name, k); bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	return best, bestDist >= 0 && bestDist <= max(2, size/3)
}

// editDistance is the Levenshtein distance between a and b, in bytes:
// the fewest insertions, deletions and substitutions that turn a into b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
