package host

import (
	"slices"
	"strings"
)

// bindingHint says, for people, which bindings there are and which one a mistyped binding may
// have meant: "permitted: PAGE_QUEUE, TASKS; did you mean PAGE_QUEUE?".
func bindingHint(what, binding string, bindings []string) string {
	if len(bindings) == 0 {
		return "no binding is " + what
	}
	bindings = slices.Sorted(slices.Values(bindings))
	hint := what + ": " + strings.Join(bindings, ", ")
	best, bestDist := "", len(binding)/2+1 // closer than half its length
	for _, b := range bindings {
		if d := editDistance(strings.ToUpper(binding), strings.ToUpper(b)); d < bestDist && b != binding {
			best, bestDist = b, d
		}
	}
	if best != "" {
		hint += "; did you mean " + best + "?"
	}
	return hint
}

// editDistance is the Levenshtein distance between a and b, in bytes.
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
