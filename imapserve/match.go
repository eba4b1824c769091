package imapserve

import "strings"

// matchMailbox reports whether the mailbox name matches the LIST
// reference and pattern (RFC 3501 section 6.3.8): the reference is
// prepended to the pattern unless the pattern starts with the delimiter;
// "*" matches any characters and "%" any but the delimiter, which no
// list name holds. Case is ignored, as list names are lower case.
//
// It takes time proportional to len(name) times len(pattern), where
// imapserver.MatchList backtracks without bound: a pattern of many
// wildcards from a hostile client would take it exponential time.
func matchMailbox(name, ref, pattern string) bool {
	if strings.HasPrefix(pattern, string(Delim)) {
		pattern = pattern[1:]
	} else {
		pattern = ref + pattern
	}
	return glob(name, strings.ToLower(pattern))
}

// glob matches name against pattern with the wildcards * and %, where %
// does not match the delimiter: dynamic programming over the pattern,
// one name character at a time.
func glob(name, pattern string) bool {
	m := len(pattern)
	dp := make([]bool, m+1) // dp[j]: pattern[:j] matches the name read so far
	next := make([]bool, m+1)
	dp[0] = true
	for j := 1; j <= m && isWild(pattern[j-1]); j++ {
		dp[j] = true
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		next[0] = false
		for j := 1; j <= m; j++ {
			switch pc := pattern[j-1]; pc {
			case '*':
				next[j] = next[j-1] || dp[j]
			case '%':
				next[j] = next[j-1] || dp[j] && c != byte(Delim)
			default:
				next[j] = dp[j-1] && pc == c
			}
		}
		dp, next = next, dp
	}
	return dp[m]
}

func isWild(c byte) bool { return c == '*' || c == '%' }
