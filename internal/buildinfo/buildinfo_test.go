package buildinfo

import (
	"runtime/debug"
	"testing"
)

// Go's record comes first, the stamps of .ci/build fill in what it lacks, "(devel)" is the last
// resort.
func TestFrom(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	stamped := Info{Version: "v0.0.0-20260102150405-fedcba987654", Commit: "fedcba9876543210", Modified: true}
	for _, tc := range []struct {
		name    string
		bi      *debug.BuildInfo
		stamped Info
		want    string
	}{
		{"go install of a tag", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, Info{}, "v0.1.0"},
		{"a checkout", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.1"}, Settings: vcs("0123456789abcdef0123", "false")}, Info{}, "v0.1.1 (commit 0123456789ab)"},
		{"a checkout with changes", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260102150405-0123456789ab+dirty"}, Settings: vcs("0123456789abcdef0123", "true")}, Info{},
			"v0.0.0-20260102150405-0123456789ab+dirty (commit 0123456789ab, modified)"},
		{"Go's record wins over the stamps", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.1"}, Settings: vcs("0123456789abcdef0123", "false")}, stamped, "v0.1.1 (commit 0123456789ab)"},
		{"-buildvcs=false, stamped", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, stamped, "v0.0.0-20260102150405-fedcba987654 (commit fedcba987654, modified)"},
		{"only a commit stamped", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Info{Commit: "fedcba9876543210"}, "(devel) (commit fedcba987654)"},
		{"no build information, stamped", nil, stamped, "v0.0.0-20260102150405-fedcba987654 (commit fedcba987654, modified)"},
		{"nothing", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Info{}, "(devel)"},
		{"nothing at all", nil, Info{}, "(devel)"},
	} {
		if got := From(tc.bi, tc.stamped).String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
