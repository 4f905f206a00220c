package auth

import "testing"

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pat, name string
		want      bool
	}{
		{"echo", "echo", true},
		{"echo", "echo2", false},
		{"echo", "ech", false},
		{"", "", true},
		{"*", "", true},
		{"*", "a/b/c", true},
		{"demo://static/*", "demo://static/", true},
		{"demo://static/*", "demo://static/a/b", true},
		{"demo://static/*", "demo://static", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYcZ", false},
		{"*.txt", "notes.txt.bak", false},
		{"*.txt", "a.txt.txt", true},
		{"**", "x", true},
		{"a?", "ab", false}, // only '*' is special
		{"a?", "a?", true},
		{"[ab]", "a", false},
		{"*aaa*aaa*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
	} {
		if got := match(tc.pat, tc.name); got != tc.want {
			t.Errorf("match(%q, %q) = %v, want %v", tc.pat, tc.name, got, tc.want)
		}
	}
}
