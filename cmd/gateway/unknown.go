package main

import (
	"io"
	"strings"

	"github.com/kelseyhightower/envconfig"
)

// unknownSettings finds the GATEWAY_* variables in environ that no setting
// reads, each with the setting it most likely meant ("" when none is
// close): a typo in a setting's name would otherwise leave its default in
// force without a word. Kubernetes' service links (GATEWAY_SERVICE_HOST,
// GATEWAY_PORT_8080_TCP and the like, for a Service named gateway) are not
// settings and are passed over.
func unknownSettings(environ []string) (names, meant []string) {
	known := settingNames()
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix+"_") || known[name] || serviceLink(name) {
			continue
		}
		if _, ok := retired[name]; ok {
			continue // refused with its own message (see loadConfig)
		}
		names, meant = append(names, name), append(meant, closest(name, known))
	}
	return names, meant
}

// settingNames is every variable a setting reads, named as envconfig names
// them.
func settingNames() map[string]bool {
	var b strings.Builder
	_ = envconfig.Usagef(envPrefix, &Config{}, io.Writer(&b), "{{range .}}{{usage_key .}}\n{{end}}")
	known := map[string]bool{}
	for name := range strings.FieldsSeq(b.String()) {
		known[name] = true
	}
	return known
}

func serviceLink(name string) bool {
	rest := strings.TrimPrefix(name, envPrefix+"_")
	return strings.HasPrefix(rest, "SERVICE_") || rest == "PORT" || strings.HasPrefix(rest, "PORT_")
}

// closest is the known name fewest edits away from name, if that is at
// most a third of the length of what follows the prefix (one edit at
// least); of names as close, the first in order.
func closest(name string, known map[string]bool) string {
	cut := len(envPrefix) + 1
	best, bestD := "", max(1, (len(name)-cut)/3)+1
	for k := range known {
		if d := editDistance(name[cut:], k[cut:]); d < bestD || d == bestD && best != "" && k < best {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
